// Conversions for float16/bfloat16 storage with float32 accumulation, and the final scaling of "mean".
#pragma once
#include <cstddef>

#include "base/dtype.h"

namespace spmd::kernels {

void widenToF32(DType dt, const void* src, float* dst, size_t count);     // dt is F16 or BF16
void narrowFromF32(DType dt, const float* src, void* dst, size_t count);  // dt is F16 or BF16
// float32 copies of any floating-point dtype's values and back (float64 and halves round to nearest even on
// the way to their narrower type): for stages that compute in float32 whatever the tensor holds.
void toF32(DType dt, const void* src, float* dst, size_t count);
void fromF32(DType dt, const float* src, void* dst, size_t count);
// Divides rather than multiplying by 1/d, so each result is the correctly rounded quotient.
void divideInPlace(DType dt, void* data, size_t count, double divisor);  // dt is F32 or F64

}  // namespace spmd::kernels
