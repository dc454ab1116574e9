#include "kernels/cpu/onebit.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "kernels/cpu/clones.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <type_traits>

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

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define SPMD_ONEBIT_AVX2 1
// Byte m with its bits in reverse order: _mm256_movemask_ps puts element j in bit j, the wire wants bit 7-j.
struct BitReverse {
  uint8_t of[256];
  constexpr BitReverse() : of{} {
    for (int m = 0; m < 256; ++m)
      for (int j = 0; j < 8; ++j)
        if (m & (1 << j)) of[m] = uint8_t(of[m] | (0x80 >> j));
  }
};
constexpr BitReverse kBitReverse{};

// For each byte of signs, its 8 elements' float sign bits: set where the bit is clear (a negative element).
// One load per source and group where decoding the byte in registers took five instructions.
struct SignMasks {
  alignas(32) uint32_t of[256][8];
  constexpr SignMasks() : of{} {
    for (int m = 0; m < 256; ++m)
      for (int j = 0; j < 8; ++j) of[m][j] = (m & (0x80 >> j)) ? 0u : 0x80000000u;
  }
};
constexpr SignMasks kSignMasks{};

// The AVX2 forms of the float kernels' passes below: a group of 8 elements goes through every step in
// registers, in one pass, so memory streams while they compute (the portable forms' loops over a tile in L1
// leave it idle between tiles: accumulateSigns ran at half memory's speed). The same operations in the same
// order, so the same bits: settled by +-carried, sources added in order as +-scale (the sign bit flipped
// where the bit is clear, which is scale * -1), squares in double in addAndSumSquares' lanes (lane j: element j
// of each group), signs by v >= 0.
namespace avx2 {

[[gnu::target("avx2")]] inline __m256 settle(__m256 v, float carried) {
  const __m256 ge = _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GE_OQ);
  return _mm256_sub_ps(v, _mm256_blendv_ps(_mm256_set1_ps(-carried), _mm256_set1_ps(carried), ge));
}

[[gnu::target("avx2")]] inline uint8_t signsOf(__m256 v) {
  return kBitReverse.of[_mm256_movemask_ps(_mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GE_OQ))];
}

// lanes 0-3 in low, 4-7 in high gain v's squares.
[[gnu::target("avx2")]] inline void addSquares(__m256 v, __m256d& low, __m256d& high) {
  const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
  low = _mm256_add_pd(low, _mm256_mul_pd(lo, lo));
  high = _mm256_add_pd(high, _mm256_mul_pd(hi, hi));
}

// settleAddPackSigns over `groups` whole groups, all with input.
[[gnu::target("avx2"), gnu::noinline]] void settleAddPackSigns(float* __restrict x, const float* __restrict y, size_t groups,
                                                             float carried, uint8_t* __restrict packed, SquareSums& sums) {
  __m256d low = _mm256_loadu_pd(sums.lanes), high = _mm256_loadu_pd(sums.lanes + 4);
  for (size_t k = 0; k < groups; ++k) {
    const __m256 v = _mm256_add_ps(settle(_mm256_loadu_ps(x + 8 * k), carried), _mm256_loadu_ps(y + 8 * k));
    _mm256_storeu_ps(x + 8 * k, v);
    addSquares(v, low, high);
    packed[k] = signsOf(v);
  }
  _mm256_storeu_pd(sums.lanes, low);
  _mm256_storeu_pd(sums.lanes + 4, high);
}

// One tile of accumulateSigns (len a multiple of 8, count >= 1); returns its sum of squares.
[[gnu::target("avx2"), gnu::noinline]] double accumulateTile(const uint8_t* const* __restrict packed, size_t firstByte,
                                                           const float* __restrict scales, int count, float* __restrict a,
                                                           size_t len, float carried, uint8_t* __restrict signs) {
  __m256d low = _mm256_setzero_pd(), high = _mm256_setzero_pd();
  for (size_t k = 0; k < len / 8; ++k) {
    __m256 v = _mm256_loadu_ps(a + 8 * k);
    if (carried != 0.0f) v = settle(v, carried);
    for (int c = 0; c < count; ++c) {
      const __m256 negative = _mm256_load_ps(reinterpret_cast<const float*>(kSignMasks.of[packed[c][firstByte + k]]));
      v = _mm256_add_ps(v, _mm256_xor_ps(_mm256_set1_ps(scales[c]), negative));
    }
    _mm256_storeu_ps(a + 8 * k, v);
    addSquares(v, low, high);
    if (signs) signs[k] = signsOf(v);
  }
  SquareSums sums;
  _mm256_storeu_pd(sums.lanes, low);
  _mm256_storeu_pd(sums.lanes + 4, high);
  return sums.total();
}

}  // namespace avx2

bool hasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
#endif

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
#ifdef SPMD_ONEBIT_AVX2
  if constexpr (std::is_same_v<T, float>) {
    if (hasAvx2()) {  // the whole groups with input; the rest below
      const size_t groups = n / 8, done = 8 * groups;
      avx2::settleAddPackSigns(x, y, groups, carried, packed, sums);
      x += done, y += done, n -= done, len -= done, packed += groups;
    }
  }
#endif
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
#ifdef SPMD_ONEBIT_AVX2
    if constexpr (std::is_same_v<T, float>) {
      if (count > 0 && len % 8 == 0 && hasAvx2()) {
        squares += avx2::accumulateTile(packed, t0 / 8, scales, count, a, len, carried, signs ? signs + t0 / 8 : nullptr);
        continue;
      }
    }
#endif
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
