// Seeded tensor fills. Every value is a pure function of (fill, rank, index), so any rank can regenerate
// any other rank's input when checking results, without communication.
#pragma once
#include <cstddef>
#include <cstdint>

#include "base/dtype.h"

namespace spmd::kernels {

struct Fill {
  enum class Kind : uint8_t { Normal, Uniform, Integers, Constant, Rank } kind = Kind::Integers;
  uint64_t seed = 0;
  double a = 0;  // normal: mean, uniform/integers: low, constant: value
  double b = 0;  // normal: std,  uniform/integers: high
};

// The value element i of `rank`'s tensor holds, after rounding to dt.
double fillValue(const Fill& f, DType dt, int rank, size_t i);
// Elements [first, first + count) of `rank`'s tensor: stored as dt, or as the doubles fillValue gives.
void fillBuffer(const Fill& f, DType dt, int rank, void* data, size_t count, size_t first = 0);
void fillValues(const Fill& f, DType dt, int rank, size_t first, size_t count, double* out);

// Converts one element; integer dtypes round half away from zero and saturate.
void storeValue(DType dt, double v, void* dst);
double loadValue(DType dt, const void* src);

}  // namespace spmd::kernels
