#include "kernels/cpu/fill.h"

#include <cmath>

#include "kernels/cpu/clones.h"

namespace spmd::kernels {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finaliser: a strong 64-bit hash
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

double unit(uint64_t h) { return double(h >> 11) * 0x1.0p-53; }  // [0, 1)

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

}  // namespace

void storeValue(DType dt, double v, void* dst) {
  byElementType(dt, [&]<class T>(T, auto round, auto) { *static_cast<T*>(dst) = round(v); });
}

double loadValue(DType dt, const void* src) {
  return byElementType(dt, [&]<class T>(T, auto, auto read) { return read(*static_cast<const T*>(src)); });
}

double fillValue(const Fill& f, DType dt, int rank, size_t i) {
  double v = 0;
  fillValues(f, dt, rank, i, 1, &v);
  return v;
}

SPMD_CPU_KERNEL void fillBuffer(const Fill& f, DType dt, int rank, void* data, size_t count, size_t first) {
  byElementType(dt, [&]<class T>(T, auto round, auto) {
    T* out = static_cast<T*>(data);
    generate(f, rank, first, count, [out, round](size_t k, double v) { out[k] = round(v); });
  });
}

SPMD_CPU_KERNEL void fillValues(const Fill& f, DType dt, int rank, size_t first, size_t count, double* out) {
  byElementType(dt, [&]<class T>(T, auto round, auto read) {
    generate(f, rank, first, count, [out, round, read](size_t k, double v) { out[k] = read(round(v)); });
  });
}

}  // namespace spmd::kernels
