#include "kernels/cpu/fill.h"

#include <cmath>
#include <limits>

namespace spmd::kernels {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finaliser: a strong 64-bit hash
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

double unit(uint64_t h) { return double(h >> 11) * 0x1.0p-53; }  // [0, 1)

template <typename T>
T saturate(double v) {
  constexpr double lo = double(std::numeric_limits<T>::min()), hi = double(std::numeric_limits<T>::max());
  return v <= lo ? std::numeric_limits<T>::min() : v >= hi ? std::numeric_limits<T>::max() : T(std::llround(v));
}

// Element i's hash is mix(base ^ i), base a function of (seed, rank) alone.
uint64_t baseOf(const Fill& f, int rank) { return mix(f.seed ^ (uint64_t(rank) << 40)); }

// Element values before rounding to a dtype, from each element's hash. `kind` is a template argument so
// that the loops in generate() carry no per-element switch.
template <Fill::Kind kind>
double valueOf(const Fill& f, int rank, uint64_t h) {
  if constexpr (kind == Fill::Kind::Normal) {
    double u1 = 1.0 - unit(h), u2 = unit(mix(h));
    return f.a + f.b * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  } else if constexpr (kind == Fill::Kind::Uniform) {
    return f.a + (f.b - f.a) * unit(h);
  } else if constexpr (kind == Fill::Kind::Integers) {
    return f.a + std::floor(unit(h) * (f.b - f.a + 1));
  } else if constexpr (kind == Fill::Kind::Constant) {
    return f.a;
  } else {
    return rank;
  }
}

// store(k, v) for element first + k, k < count, of `rank`'s tensor. The fill is copied to a local so that
// stores through the caller's pointers cannot alias it and the loop keeps it in registers.
template <class Store>
void generate(const Fill& fill, int rank, size_t first, size_t count, Store store) {
  const Fill f = fill;
  const uint64_t base = baseOf(f, rank);
  auto each = [&]<Fill::Kind kind>() {
    for (size_t k = 0; k < count; ++k) store(k, valueOf<kind>(f, rank, mix(base ^ uint64_t(first + k))));
  };
  switch (f.kind) {
    case Fill::Kind::Normal: return each.template operator()<Fill::Kind::Normal>();
    case Fill::Kind::Uniform: return each.template operator()<Fill::Kind::Uniform>();
    case Fill::Kind::Integers: return each.template operator()<Fill::Kind::Integers>();
    case Fill::Kind::Constant: return each.template operator()<Fill::Kind::Constant>();
    case Fill::Kind::Rank: return each.template operator()<Fill::Kind::Rank>();
  }
}

template <class T, class Convert>
void fillTyped(const Fill& f, int rank, void* data, size_t first, size_t count, Convert convert) {
  T* out = static_cast<T*>(data);
  generate(f, rank, first, count, [out, convert](size_t k, double v) { out[k] = convert(v); });
}

}  // namespace

void storeValue(DType dt, double v, void* dst) {
  switch (dt) {
    case DType::F32: *static_cast<float*>(dst) = float(v); break;
    case DType::F64: *static_cast<double*>(dst) = v; break;
    case DType::I32: *static_cast<int32_t*>(dst) = saturate<int32_t>(v); break;
    case DType::I64: *static_cast<int64_t*>(dst) = saturate<int64_t>(v); break;
    case DType::F16: *static_cast<uint16_t*>(dst) = floatToHalf(float(v)); break;
    case DType::BF16: *static_cast<uint16_t*>(dst) = floatToBf16(float(v)); break;
  }
}

double loadValue(DType dt, const void* src) {
  switch (dt) {
    case DType::F32: return *static_cast<const float*>(src);
    case DType::F64: return *static_cast<const double*>(src);
    case DType::I32: return *static_cast<const int32_t*>(src);
    case DType::I64: return double(*static_cast<const int64_t*>(src));
    case DType::F16: return halfToFloat(*static_cast<const uint16_t*>(src));
    case DType::BF16: return bf16ToFloat(*static_cast<const uint16_t*>(src));
  }
  return 0;
}

double fillValue(const Fill& f, DType dt, int rank, size_t i) {
  double v = 0;
  generate(f, rank, i, 1, [&](size_t, double x) { v = x; });
  alignas(8) unsigned char tmp[8];
  storeValue(dt, v, tmp);
  return loadValue(dt, tmp);
}

void fillBuffer(const Fill& f, DType dt, int rank, void* data, size_t count, size_t first) {
  switch (dt) {
    case DType::F32: return fillTyped<float>(f, rank, data, first, count, [](double v) { return float(v); });
    case DType::F64: return fillTyped<double>(f, rank, data, first, count, [](double v) { return v; });
    case DType::I32: return fillTyped<int32_t>(f, rank, data, first, count, saturate<int32_t>);
    case DType::I64: return fillTyped<int64_t>(f, rank, data, first, count, saturate<int64_t>);
    case DType::F16: return fillTyped<uint16_t>(f, rank, data, first, count, [](double v) { return floatToHalf(float(v)); });
    case DType::BF16: return fillTyped<uint16_t>(f, rank, data, first, count, [](double v) { return floatToBf16(float(v)); });
  }
}

void fillValues(const Fill& f, DType dt, int rank, size_t first, size_t count, double* out) {
  alignas(8) unsigned char tmp[8];
  generate(f, rank, first, count, [&](size_t k, double v) {
    storeValue(dt, v, tmp);
    out[k] = loadValue(dt, tmp);
  });
}

}  // namespace spmd::kernels
