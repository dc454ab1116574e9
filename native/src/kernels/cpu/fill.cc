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

double raw(const Fill& f, int rank, size_t i) {
  uint64_t h = mix(mix(f.seed ^ (uint64_t(rank) << 40)) ^ uint64_t(i));
  switch (f.kind) {
    case Fill::Kind::Normal: {
      double u1 = 1.0 - unit(h), u2 = unit(mix(h));
      return f.a + f.b * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
    }
    case Fill::Kind::Uniform: return f.a + (f.b - f.a) * unit(h);
    case Fill::Kind::Integers: return f.a + std::floor(unit(h) * (f.b - f.a + 1));
    case Fill::Kind::Constant: return f.a;
    case Fill::Kind::Rank: return rank;
  }
  return 0;
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
  alignas(8) unsigned char tmp[8];
  storeValue(dt, raw(f, rank, i), tmp);
  return loadValue(dt, tmp);
}

void fillBuffer(const Fill& f, DType dt, int rank, void* data, size_t count) {
  auto* p = static_cast<unsigned char*>(data);
  size_t es = elementSize(dt);
  for (size_t i = 0; i < count; ++i) storeValue(dt, raw(f, rank, i), p + i * es);
}

}  // namespace spmd::kernels
