#include "kernels/cpu/quant.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/clones.h"

namespace spmd::kernels {
namespace {

// The loops are written in shapes GCC and Clang vectorise without -ffast-math or intrinsics (straight
// loops over restrict pointers, no calls, selects instead of branches).

// Values per tile where codes are summed, or unpacked from or staged for int4 nibbles, one byte each: a
// tile's codes (1 KiB per source) and the floats they stand for stay in L1.
constexpr size_t kTile = 1024;

float stepAt(const uint8_t* block, size_t k) {
  float s;
  std::memcpy(&s, block + 4 * k, 4);
  return s;
}

// Independent running maxima: one would serialise every compare-and-select on its latency, which on
// baseline x86-64 (no packed integer max) costs several instructions.
constexpr int kLanes = 16;

// The bits of the largest |y[i]|: non-negative floats order as their bit patterns do, and an integer max
// vectorises where a float max (with NaN's rules) does not. The result is kNonFinite or above when some
// value is infinite or NaN, so one reduction also answers "all finite?". Signed, since the sign bit is
// clear and SSE2 compares only signed integers.
uint32_t absmaxBits(const float* __restrict y, size_t n) {
  int32_t lanes[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const int32_t b = std::bit_cast<int32_t>(y[i + size_t(l)]) & 0x7fffffff;
      lanes[l] = b > lanes[l] ? b : lanes[l];
    }
  }
  for (; i < n; ++i) {
    const int32_t b = std::bit_cast<int32_t>(y[i]) & 0x7fffffff;
    lanes[0] = b > lanes[0] ? b : lanes[0];
  }
  int32_t m = 0;
  for (int32_t v : lanes) m = v > m ? v : m;
  return uint32_t(m);
}

// y[i] <- x[i] + beta·y[i]: the values error feedback quantizes, written where the error was.
void addFeedback(const float* __restrict x, float* __restrict y, float beta, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = x[i] + beta * y[i];
}

// One code per value of y: q = clamp(rhe(y/step), lo, hi). Clamping first is the same as clamping after,
// since the bounds are integers, and keeps the rounding trick in range; a NaN (rejected by the caller
// afterwards) becomes lo rather than an undefined conversion. Rounding by kRoundHalfEven: nearbyint would do
// the same, but does not vectorise on baseline x86-64, which has no packed round instruction. With Keep, y[i]
// becomes y[i] - q·step.
template <bool Keep>
void codeTile(std::conditional_t<Keep, float*, const float*> __restrict y, size_t n, float step, float lo, float hi,
              int8_t* __restrict q) {
  for (size_t i = 0; i < n; ++i) {
    float v = y[i] / step;
    v = v > lo ? v : lo;
    v = v < hi ? v : hi;
    v = (v + kRoundHalfEven) - kRoundHalfEven;
    q[i] = int8_t(int32_t(v));
    if constexpr (Keep) y[i] = y[i] - v * step;
  }
}

// Value 2k in the high nibble of byte k, 2k+1 in the low one; n even.
void packNibbles(const int8_t* __restrict q, size_t n, uint8_t* __restrict packed) {
  for (size_t k = 0; k < n / 2; ++k) packed[k] = uint8_t((q[2 * k] << 4) | (q[2 * k + 1] & 0x0f));
}

// Arithmetic shifts sign-extend each nibble back to a byte.
void unpackNibbles(const uint8_t* __restrict packed, size_t n, int8_t* __restrict q) {
  for (size_t k = 0; k < n / 2; ++k) {
    const auto b = int8_t(packed[k]);
    q[2 * k] = int8_t(b >> 4);
    q[2 * k + 1] = int8_t(int8_t(b << 4) >> 4);
  }
}

void decode(const int8_t* __restrict q, size_t n, float step, float* __restrict out) {
  for (size_t i = 0; i < n; ++i) out[i] = float(q[i]) * step;
}

void decodeAdd(const int8_t* __restrict q, size_t n, float step, float* __restrict acc) {
  for (size_t i = 0; i < n; ++i) acc[i] += float(q[i]) * step;
}

// Two sources per pass over the sum, added in their order, so the sum travels through the cache half as
// often; the roundings are those of adding one source at a time.
void decode2(const int8_t* __restrict q0, float s0, const int8_t* __restrict q1, float s1, size_t n, float* __restrict out) {
  for (size_t i = 0; i < n; ++i) out[i] = float(q0[i]) * s0 + float(q1[i]) * s1;
}

void decodeAdd2(const int8_t* __restrict q0, float s0, const int8_t* __restrict q1, float s1, size_t n,
                float* __restrict acc) {
  for (size_t i = 0; i < n; ++i) acc[i] = (acc[i] + float(q0[i]) * s0) + float(q1[i]) * s1;
}

// Codes t0 .. t0+n-1 of a group as one signed byte per value: the bytes themselves (int8), or unpacked into
// `tile` (int4; t0 even).
const int8_t* codesAt(int bits, const uint8_t* codes, size_t t0, size_t n, int8_t* tile) {
  if (bits == 8) return reinterpret_cast<const int8_t*>(codes) + t0;
  unpackNibbles(codes + t0 / 2, n, tile);
  return tile;
}

// One group of len values y (feedback already added): its step into `step`, its codes into `codes`. Returns
// absmaxBits(y) for the caller's finiteness check.
template <bool Keep>
uint32_t quantizeGroup(std::conditional_t<Keep, float*, const float*> y, size_t len, int bits, uint8_t* step,
                       uint8_t* codes) {
  const uint32_t m = absmaxBits(y, len);
  const float half = float(1 << (bits - 1));
  const float s = m == 0 ? 1.0f : std::bit_cast<float>(m) / half;
  std::memcpy(step, &s, 4);
  if (bits == 8) {
    codeTile<Keep>(y, len, s, -half, half - 1, reinterpret_cast<int8_t*>(codes));
    return m;
  }
  alignas(64) int8_t q[kTile];
  for (size_t t0 = 0; t0 < len; t0 += kTile) {
    const size_t n = std::min(kTile, len - t0);
    codeTile<Keep>(y + t0, n, s, -half, half - 1, q);
    packNibbles(q, n, codes + t0 / 2);
  }
  return m;
}

// Where group k of a block of n values starts, how long it is, and where its codes are.
struct Group {
  size_t at, len, codeOffset;
  Group(QuantFormat f, size_t n, size_t k)
      : at(k * f.groupSize), len(std::min(f.groupSize, n - at)), codeOffset(4 * f.groups(n) + f.codeBytes(at)) {}
};

// acc[0..g.len) = the sum over sources of group g's values, in source order, tile by tile.
void sumGroup(QuantFormat f, const uint8_t* const* in, int count, size_t k, const Group& g, float* acc) {
  if (count == 0) std::fill(acc, acc + g.len, 0.0f);
  alignas(64) int8_t tiles[2][kTile];
  for (size_t t0 = 0; t0 < g.len; t0 += kTile) {
    const size_t n = std::min(kTile, g.len - t0);
    float* a = acc + t0;
    auto codes = [&](int c, int slot) { return codesAt(f.bits, in[c] + g.codeOffset, t0, n, tiles[slot]); };
    int c = std::min(count, 2);
    if (count == 1) decode(codes(0, 0), n, stepAt(in[0], k), a);
    if (count >= 2) decode2(codes(0, 0), stepAt(in[0], k), codes(1, 1), stepAt(in[1], k), n, a);
    for (; c + 1 < count; c += 2) decodeAdd2(codes(c, 0), stepAt(in[c], k), codes(c + 1, 1), stepAt(in[c + 1], k), n, a);
    if (c < count) decodeAdd(codes(c, 0), n, stepAt(in[c], k), a);
  }
}

// Quantizes y (group k) with or without error feedback; `x` is y before feedback, `error` the whole block's.
uint32_t quantizeWithFeedback(QuantFormat f, const float* x, float* error, float beta, size_t k, const Group& g,
                              uint8_t* out) {
  if (!error) return quantizeGroup<false>(x, g.len, f.bits, out + 4 * k, out + g.codeOffset);
  addFeedback(x, error + g.at, beta, g.len);
  return quantizeGroup<true>(error + g.at, g.len, f.bits, out + 4 * k, out + g.codeOffset);
}

}  // namespace

SPMD_CPU_KERNEL bool quantize(QuantFormat f, const float* x, float* error, float beta, size_t n, uint8_t* out) {
  uint32_t worst = 0;
  for (size_t k = 0; k < f.groups(n); ++k) {
    const Group g(f, n, k);
    worst = std::max(worst, quantizeWithFeedback(f, x + g.at, error, beta, k, g, out));
  }
  return worst < kNonFinite;
}

SPMD_CPU_KERNEL void dequantize(QuantFormat f, const uint8_t* in, size_t n, float* out) {
  for (size_t k = 0; k < f.groups(n); ++k) sumGroup(f, &in, 1, k, Group(f, n, k), out + k * f.groupSize);
}

SPMD_CPU_KERNEL void dequantizeSum(QuantFormat f, const uint8_t* const* in, int count, size_t n, float* out) {
  for (size_t k = 0; k < f.groups(n); ++k) {
    const Group g(f, n, k);
    sumGroup(f, in, count, k, g, out + g.at);
  }
}

SPMD_CPU_KERNEL bool dequantizeSumQuantize(QuantFormat f, const uint8_t* const* in, int count, float* error, float beta, size_t n,
                           float* scratch, uint8_t* out) {
  uint32_t worst = 0;
  for (size_t k = 0; k < f.groups(n); ++k) {
    const Group g(f, n, k);
    sumGroup(f, in, count, k, g, scratch);
    worst = std::max(worst, quantizeWithFeedback(f, scratch, error, beta, k, g, out));
  }
  return worst < kNonFinite;
}

}  // namespace spmd::kernels
