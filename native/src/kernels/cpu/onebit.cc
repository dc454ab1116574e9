#include "kernels/cpu/onebit.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace spmd::kernels {
namespace {

// The loops below are written in the shapes GCC and Clang vectorise without -ffast-math or intrinsics
// (straight loops over restrict pointers, fixed-length inner loops); bit gathering and spreading, which
// do not vectorise as bit operations, go through a table or one multiply per byte instead.

// Several independent partial sums: without -ffast-math the compiler may not reorder one running double
// sum, which would serialise every add on its latency; explicit lanes let it keep a vector of them.
constexpr int kLanes = 8;

double total(const double (&lanes)[kLanes]) {
  double s = 0;
  for (double v : lanes) s += v;
  return s;
}

// Row b holds sign_j for the eight elements byte b packs: +1 where bit 7-j is set, else -1. Multiplying
// a scale by +-1 is exact, so scale * row[j] is exactly +-scale.
template <class T>
struct SignTable {
  T row[256][8];
  constexpr SignTable() : row{} {
    for (int b = 0; b < 256; ++b)
      for (int j = 0; j < 8; ++j) row[b][j] = (b & (0x80 >> j)) ? T(1) : T(-1);
  }
};
template <class T>
constexpr SignTable<T> kSigns{};

// Elements per tile for the kernels that stage through scratch: 2048 floats or doubles (8 or 16 KiB)
// plus the data they work on stay in L1.
constexpr size_t kTile = 2048;

// One 0/1 byte per element (element j of a group in byte j, little-endian) becomes one packed byte with
// element j in bit 7-j: the multiply moves byte j's low bit to bit 63-j, with no carries between them.
static_assert(std::endian::native == std::endian::little, "gatherBits reads eight flag bytes as one integer");
uint8_t gatherBits(const uint8_t* flags) {
  uint64_t word;
  std::memcpy(&word, flags, 8);
  return uint8_t((word * 0x8040201008040201ull) >> 56);
}

// x[i] += y[i], then sums[i % kLanes] += x[i]^2, for whole groups of kLanes (n a multiple of kLanes).
template <class T>
void addIntoLanes(T* __restrict x, const T* __restrict y, size_t n, double* sums) {
  double lanes[kLanes];
  std::copy(sums, sums + kLanes, lanes);
  for (size_t i = 0; i < n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      x[i + l] += y[i + l];
      lanes[l] += double(x[i + l]) * double(x[i + l]);
    }
  }
  std::copy(lanes, lanes + kLanes, sums);
}

// The lane that element i of a region of n elements adds its square to: by index, but the last partial
// group's all into lane 0 (after the whole groups, as the loops above add them).
size_t laneOf(size_t i, size_t n) { return i < n - n % kLanes ? i % kLanes : 0; }

// Sets packed[k] to the signs of v[8k..8k+7], for n (a multiple of 8) elements, through `flags` (n bytes).
template <class T>
void packSigns(const T* __restrict v, size_t n, uint8_t* __restrict flags, uint8_t* __restrict packed) {
  for (size_t i = 0; i < n; ++i) flags[i] = v[i] >= T(0);
  for (size_t k = 0; k < n / 8; ++k) packed[k] = gatherBits(flags + 8 * k);
}

// v[i] <- v[i] - s·sign(v[i]), the compression error packSignsKeepError leaves.
template <class T>
void subtractScaledSigns(T* __restrict v, size_t n, T s) {
  for (size_t i = 0; i < n; ++i) v[i] -= v[i] >= T(0) ? s : -s;
}

// One tile of accumulateSigns (sources' bits at packed[c] + offset): returns the sum of the new squares.
template <class T>
double accumulateTile(const uint8_t* const* packed, size_t offset, const T* scales, int count, T* __restrict a,
                      size_t len, T* __restrict scaled) {
  if (count == 0) return sumSquares(a, len);
  for (int c = 0; c + 1 < count; ++c) {
    unpackScaled(packed[c] + offset, len, scales[c], scaled);
    for (size_t i = 0; i < len; ++i) a[i] += scaled[i];
  }
  unpackScaled(packed[count - 1] + offset, len, scales[count - 1], scaled);
  return addAndSumSquares(a, scaled, len);  // the last source also squares, in the same pass
}

}  // namespace

template <class T>
double addAndSumSquares(T* __restrict x, const T* __restrict y, size_t n) {
  double lanes[kLanes] = {};
  const size_t whole = n - n % kLanes;
  addIntoLanes(x, y, whole, lanes);
  for (size_t i = whole; i < n; ++i) {
    x[i] += y[i];
    lanes[0] += double(x[i]) * double(x[i]);
  }
  return total(lanes);
}

template <class T>
double sumSquares(const T* __restrict x, size_t n) {
  double lanes[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] += double(x[i + l]) * double(x[i + l]);
  }
  for (; i < n; ++i) lanes[0] += double(x[i]) * double(x[i]);
  return total(lanes);
}

template <class T>
void packSignsKeepError(T* __restrict x, size_t n, T scale, uint8_t* __restrict packed) {
  alignas(64) uint8_t flags[kTile];
  for (size_t t0 = 0; t0 < n; t0 += kTile) {
    const size_t len = std::min(kTile, n - t0);
    T* __restrict v = x + t0;
    for (size_t i = 0; i < len; ++i) {
      const bool positive = v[i] >= T(0);
      flags[i] = positive;
      v[i] -= positive ? scale : -scale;
    }
    for (size_t k = 0; k < len / 8; ++k) packed[t0 / 8 + k] = gatherBits(flags + 8 * k);
  }
}

template <class T>
void unpackScaled(const uint8_t* __restrict packed, size_t n, T scale, T* __restrict out) {
  const size_t whole = n / 8;
  for (size_t k = 0; k < whole; ++k) {
    const T* row = kSigns<T>.row[packed[k]];
    for (int j = 0; j < 8; ++j) out[8 * k + j] = scale * row[j];
  }
  for (size_t i = 8 * whole; i < n; ++i) out[i] = scale * kSigns<T>.row[packed[whole]][i % 8];
}

template <class T>
double accumulateSigns(const uint8_t* const* packed, const T* scales, int count, T* __restrict acc, size_t n) {
  alignas(64) T scaled[kTile];
  double squares = 0;
  for (size_t t0 = 0; t0 < n; t0 += kTile) {
    squares += accumulateTile(packed, t0 / 8, scales, count, acc + t0, std::min(kTile, n - t0), scaled);
  }
  return squares;
}

double CarriedSquares::total() const { return spmd::kernels::total(head) + spmd::kernels::total(pad); }

// Tile by tile, so that x travels to and from memory once: the carried error taken, the addend added and
// squared (whole groups of x[0, n) in bulk; the last partial group and the padding, a few elements, one
// at a time into their lanes), the signs packed.
template <class T>
void carryAddPack(T* x, const T* y, size_t from, size_t to, size_t n, size_t len, T s, uint8_t* packed,
                  CarriedSquares& squares) {
  alignas(64) uint8_t flags[kTile];
  const size_t whole = n - n % kLanes;
  for (size_t t0 = from; t0 < to; t0 += kTile) {
    const size_t t1 = std::min(t0 + kTile, to), bulk = std::clamp(whole, t0, t1);
    subtractScaledSigns(x + t0, t1 - t0, s);
    if (bulk > t0) addIntoLanes(x + t0, y + t0, bulk - t0, squares.head);
    for (size_t i = bulk; i < t1; ++i) {
      if (i < n) x[i] += y[i];
      const double sq = double(x[i]) * double(x[i]);
      if (i < n) squares.head[laneOf(i, n)] += sq;
      else squares.pad[laneOf(i - n, len - n)] += sq;
    }
    packSigns(x + t0, t1 - t0, flags, packed + (t0 - from) / 8);
  }
}

template <class T>
void carryAccumulatePack(T* acc, size_t from, size_t to, T s, const uint8_t* const* packed, const T* weights,
                         int count, uint8_t* out, double& squares) {
  alignas(64) T scaled[kTile];
  alignas(64) uint8_t flags[kTile];
  for (size_t t0 = from; t0 < to; t0 += kTile) {
    const size_t len = std::min(kTile, to - t0);
    subtractScaledSigns(acc + t0, len, s);
    squares += accumulateTile(packed, (t0 - from) / 8, weights, count, acc + t0, len, scaled);
    packSigns(acc + t0, len, flags, out + (t0 - from) / 8);
  }
}

template <class T>
void carriedError(const T* __restrict x, size_t n, T s, T* __restrict error) {
  for (size_t i = 0; i < n; ++i) error[i] = x[i] - (x[i] >= T(0) ? s : -s);
}

#define SPMD_ONEBIT_INSTANTIATE(T)                                                              \
  template double addAndSumSquares<T>(T*, const T*, size_t);                                    \
  template double sumSquares<T>(const T*, size_t);                                              \
  template void packSignsKeepError<T>(T*, size_t, T, uint8_t*);                                 \
  template void unpackScaled<T>(const uint8_t*, size_t, T, T*);                                 \
  template double accumulateSigns<T>(const uint8_t* const*, const T*, int, T*, size_t);                     \
  template void carryAddPack<T>(T*, const T*, size_t, size_t, size_t, size_t, T, uint8_t*, CarriedSquares&);  \
  template void carryAccumulatePack<T>(T*, size_t, size_t, T, const uint8_t* const*, const T*, int, uint8_t*,  \
                                       double&);                                                           \
  template void carriedError<T>(const T*, size_t, T, T*);
SPMD_ONEBIT_INSTANTIATE(float)
SPMD_ONEBIT_INSTANTIATE(double)
#undef SPMD_ONEBIT_INSTANTIATE

}  // namespace spmd::kernels
