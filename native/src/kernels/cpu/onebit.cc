#include "kernels/cpu/onebit.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "kernels/cpu/clones.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace spmd::kernels {
namespace {

// The loops below are written in the shapes GCC and Clang vectorise without -ffast-math or intrinsics
// (straight loops over restrict pointers, fixed-length inner loops); bit gathering and spreading, which
// do not vectorise as bit operations, go through a table or one multiply per byte instead.

// Several independent partial sums (SquareSums): without -ffast-math the compiler may not reorder one running
// double sum, which would serialise every add on its latency; explicit lanes let it keep a vector of them.
constexpr int kLanes = SquareSums::kLanes;

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
constexpr size_t kTile = kSignsTile;

// One 0/1 byte per element (element j of a group in byte j, little-endian) becomes one packed byte with
// element j in bit 7-j: the multiply moves byte j's low bit to bit 63-j, with no carries between them.
static_assert(std::endian::native == std::endian::little, "gatherBits reads eight flag bytes as one integer");
uint8_t gatherBits(const uint8_t* flags) {
  uint64_t word;
  std::memcpy(&word, flags, 8);
  return uint8_t((word * 0x8040201008040201ull) >> 56);
}

// The packed bytes of m flags (m a multiple of 8).
void packFlags(const uint8_t* flags, size_t m, uint8_t* packed) {
  for (size_t k = 0; k < m / 8; ++k) packed[k] = gatherBits(flags + 8 * k);
}

// sums gains x[i]^2 for i < n. The lanes are worked on in a local copy, which no store through x may alias, so
// they stay in registers.
template <class T>
void addSquares(SquareSums& sums, const T* __restrict x, size_t n) {
  SquareSums local = sums;
  double* lanes = local.lanes;
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] += double(x[i + l]) * double(x[i + l]);
  }
  for (; i < n; ++i) lanes[0] += double(x[i]) * double(x[i]);
  sums = local;
}

// v - carried*sign(v): the compression error packSignsKeepError keeps.
template <class T>
T settled(T v, T carried) {
  return v - (v >= T(0) ? carried : -carried);
}

}  // namespace

template <class T>
SPMD_CPU_KERNEL double addAndSumSquares(T* __restrict x, const T* __restrict y, size_t n) {
  SquareSums sums;
  double* lanes = sums.lanes;
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      x[i + l] += y[i + l];
      lanes[l] += double(x[i + l]) * double(x[i + l]);
    }
  }
  for (; i < n; ++i) {
    x[i] += y[i];
    lanes[0] += double(x[i]) * double(x[i]);
  }
  return sums.total();
}

template <class T>
SPMD_CPU_KERNEL double sumSquares(const T* __restrict x, size_t n) {
  SquareSums sums;
  addSquares(sums, x, n);
  return sums.total();
}

template <class T>
SPMD_CPU_KERNEL void packSignsKeepError(T* __restrict x, size_t n, T scale, uint8_t* __restrict packed) {
  alignas(64) uint8_t flags[kTile];
  for (size_t t0 = 0; t0 < n; t0 += kTile) {
    const size_t len = std::min(kTile, n - t0);
    T* __restrict v = x + t0;
    for (size_t i = 0; i < len; ++i) {
      flags[i] = v[i] >= T(0);
      v[i] = settled(v[i], scale);
    }
    packFlags(flags, len, packed + t0 / 8);
  }
}

template <class T>
SPMD_CPU_KERNEL void settleAddPackSigns(T* __restrict x, const T* __restrict y, size_t n, size_t len, T carried,
                                        uint8_t* __restrict packed, SquareSums& sums) {
  alignas(64) uint8_t flags[kTile];
  for (size_t t0 = 0; t0 < len; t0 += kTile) {
    const size_t m = std::min(kTile, len - t0), added = t0 < n ? std::min(m, n - t0) : 0;
    T* __restrict v = x + t0;
    // Loops the compiler vectorises one by one, each over a tile in L1 (tiles start at multiples of kLanes).
    for (size_t i = 0; i < added; ++i) v[i] = settled(v[i], carried) + y[t0 + i];
    for (size_t i = added; i < m; ++i) v[i] = settled(v[i], carried);
    addSquares(sums, v, added);
    for (size_t i = 0; i < m; ++i) flags[i] = v[i] >= T(0);
    packFlags(flags, m, packed + t0 / 8);
  }
}

template <class T>
SPMD_CPU_KERNEL void unpackScaled(const uint8_t* __restrict packed, size_t n, T scale, T* __restrict out) {
  const size_t whole = n / 8;
  for (size_t k = 0; k < whole; ++k) {
    const T* row = kSigns<T>.row[packed[k]];
    for (int j = 0; j < 8; ++j) out[8 * k + j] = scale * row[j];
  }
  for (size_t i = 8 * whole; i < n; ++i) out[i] = scale * kSigns<T>.row[packed[whole]][i % 8];
}

template <class T>
void unpackScaledStreaming(const uint8_t* __restrict packed, size_t n, T scale, T* __restrict out) {
#if defined(__x86_64__)
  if (reinterpret_cast<uintptr_t>(out) % 16 == 0) {
    // SSE2, every x86-64's: the stores bound this, not the multiplies. scale * row[j], as unpackScaled.
    const size_t whole = n / 8;
    for (size_t k = 0; k < whole; ++k) {
      const T* row = kSigns<T>.row[packed[k]];
      if constexpr (sizeof(T) == 4) {
        const __m128 s = _mm_set1_ps(scale);
        for (int j = 0; j < 8; j += 4) _mm_stream_ps(out + 8 * k + j, _mm_mul_ps(s, _mm_loadu_ps(row + j)));
      } else {
        const __m128d s = _mm_set1_pd(scale);
        for (int j = 0; j < 8; j += 2) _mm_stream_pd(out + 8 * k + j, _mm_mul_pd(s, _mm_loadu_pd(row + j)));
      }
    }
    _mm_sfence();  // the streamed lines are visible before whatever the caller does next
    if (n > 8 * whole) unpackScaled(packed + whole, n - 8 * whole, scale, out + 8 * whole);
    return;
  }
#endif
  unpackScaled(packed, n, scale, out);
}

template <class T>
SPMD_CPU_KERNEL double accumulateSigns(const uint8_t* const* packed, const T* scales, int count, T* __restrict acc, size_t n,
                                       double squares, T carried, uint8_t* signs) {
  alignas(64) T scaled[kTile];
  alignas(64) uint8_t flags[kTile];
  for (size_t t0 = 0; t0 < n; t0 += kTile) {
    const size_t len = std::min(kTile, n - t0);
    T* __restrict a = acc + t0;
    if (carried != T(0)) {  // settling by 0 changes no bit
      for (size_t i = 0; i < len; ++i) a[i] = settled(a[i], carried);
    }
    if (count == 0) squares += sumSquares(a, len);
    for (int c = 0; c < count; ++c) {
      unpackScaled(packed[c] + t0 / 8, len, scales[c], scaled);
      if (c + 1 < count) {
        for (size_t i = 0; i < len; ++i) a[i] += scaled[i];
      } else {
        squares += addAndSumSquares(a, scaled, len);  // the last source also squares, in the same pass
      }
    }
    if (signs) {
      for (size_t i = 0; i < len; ++i) flags[i] = a[i] >= T(0);
      packFlags(flags, len, signs + t0 / 8);
    }
  }
  return squares;
}

#define SPMD_ONEBIT_INSTANTIATE(T)                                                              \
  template double addAndSumSquares<T>(T*, const T*, size_t);                                    \
  template double sumSquares<T>(const T*, size_t);                                              \
  template void packSignsKeepError<T>(T*, size_t, T, uint8_t*);                                 \
  template void unpackScaled<T>(const uint8_t*, size_t, T, T*);                                 \
  template void unpackScaledStreaming<T>(const uint8_t*, size_t, T, T*);                        \
  template void settleAddPackSigns<T>(T*, const T*, size_t, size_t, T, uint8_t*, SquareSums&);      \
  template double accumulateSigns<T>(const uint8_t* const*, const T*, int, T*, size_t, double, T, uint8_t*);
SPMD_ONEBIT_INSTANTIATE(float)
SPMD_ONEBIT_INSTANTIATE(double)
#undef SPMD_ONEBIT_INSTANTIATE

}  // namespace spmd::kernels
