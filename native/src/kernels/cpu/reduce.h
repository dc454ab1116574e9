// Element-wise reductions used by every algorithm. Written as plain loops over restrict pointers so the
// compiler vectorises them (check with -fopt-info-vec).
#pragma once
#include <cstddef>

#include "base/dtype.h"

namespace spmd::kernels {

// dst[i] = op(dst[i], src[i]) for F32/F64/I32/I64. Throws CommError(kInvalid) for half types.
void reduceInto(DType dt, RedOp op, void* dst, const void* src, size_t count);

// dst[i] = op(a[i], b[i]); dst may alias a or b.
void reduce3(DType dt, RedOp op, void* dst, const void* a, const void* b, size_t count);

}  // namespace spmd::kernels
