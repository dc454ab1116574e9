// Seeded tensor fills. Every value is a pure function of (fill, rank, index), so any rank can regenerate
// any other rank's input when checking results, without communication.
#pragma once
#include <cstddef>
#include <cmath>
#include <cstdint>
#include <limits>

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

template <class T>
T saturate(double v) {
  constexpr double lo = double(std::numeric_limits<T>::min()), hi = double(std::numeric_limits<T>::max());
  return v <= lo ? std::numeric_limits<T>::min() : v >= hi ? std::numeric_limits<T>::max() : T(std::llround(v));
}

// fn(T(), round, read): dt's element type T, a double rounded to a T (as storeValue does) and a T read as a
// double (as loadValue does). The one switch over dtypes, taken once a call, so that loops over elements
// inside fn call nothing.
template <class Fn>
decltype(auto) byElementType(DType dt, Fn fn) {
  const auto asDouble = [](auto x) { return double(x); };
  switch (dt) {
    case DType::F32: break;
    case DType::F64: return fn(double(), [](double v) { return v; }, asDouble);
    case DType::I32: return fn(int32_t(), saturate<int32_t>, asDouble);
    case DType::I64: return fn(int64_t(), saturate<int64_t>, asDouble);
    case DType::F16: return fn(uint16_t(), [](double v) { return floatToHalf(float(v)); }, [](uint16_t h) { return double(halfToFloat(h)); });
    case DType::BF16: return fn(uint16_t(), [](double v) { return floatToBf16(float(v)); }, [](uint16_t h) { return double(bf16ToFloat(h)); });
  }
  return fn(float(), [](double v) { return float(v); }, asDouble);
}

// f(i, value) for elements [offset, offset + count) of a dt array, i counted from 0, each as loadValue reads it.
template <class F>
void forEachValue(DType dt, const void* data, size_t offset, size_t count, F f) {
  byElementType(dt, [&]<class T>(T, auto, auto read) {
    const T* p = static_cast<const T*>(data) + offset;
    for (size_t i = 0; i < count; ++i) f(i, read(p[i]));
  });
}

}  // namespace spmd::kernels
