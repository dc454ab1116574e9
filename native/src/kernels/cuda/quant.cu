// The quantized allreduce's kernels (kernels/device_kernels.h; the CPU's are kernels/cpu/quant.h): symmetric
// per-group quantization to int8 or int4 with optional error feedback, and sums of dequantized sources,
// fused with requantization. One warp per group: it finds the group's absmax, then writes the codes. The arithmetic is the CPU's operation for operation (IEEE division, round half to even, no
// fused multiply-add: the build passes -fmad=false), so codes, steps and sums are the same bits.
#include <cstdint>

#include "kernels/cuda/common.cuh"

namespace spmd::kernels::cuda {
namespace {

// Bits at and above this, in a float with the sign cleared, are infinity or NaN.
constexpr uint32_t kNonFinite = 0x7f800000u;

// Group k of a block: where it starts, its length, where its codes are.
struct Group {
  uint64_t at, len, codes;
  __device__ Group(const QuantLayout& f, uint64_t k) {
    const uint64_t groups = (f.n + f.groupSize - 1) / f.groupSize;
    at = k * f.groupSize;
    len = min(f.groupSize, f.n - at);
    codes = 4 * groups + at * f.bits / 8;
  }
};

// One warp per group: the grid's warps step through the groups, and a group's absmax is a warp shuffle,
// not a block barrier. With a block per group each group waited on its loads, two barriers and its
// stores in turn, and quantize reached 41% of a copy's bandwidth on an H200.
template <class Work>
__device__ void forEachGroup(const QuantLayout& f, Work work) {
  const uint64_t groups = (f.n + f.groupSize - 1) / f.groupSize, warps = uint64_t(gridDim.x) * (kBlock / 32);
  for (uint64_t k = blockIdx.x * uint64_t(kBlock / 32) + threadIdx.x / 32; k < groups; k += warps) work(Group(f, k), k);
}

__device__ inline unsigned laneIndex() { return threadIdx.x & 31; }

// The int4 code in byte b: the high nibble for the first value of a pair, the low one for the second.
__device__ inline int nibble(int8_t b, bool second) { return second ? int8_t(b << 4) >> 4 : b >> 4; }
// The byte of an int4 pair (the first value high).
__device__ inline uint8_t pairByte(float q0, float q1) { return uint8_t((int(q0) << 4) | (int(q1) & 0x0f)); }

// Value i of a group's codes (int4: value 2k in the high nibble of byte k).
__device__ inline int code(const uint8_t* codes, uint64_t i, uint32_t bits) {
  if (bits == 8) return int8_t(codes[i]);
  return nibble(int8_t(codes[i / 2]), i & 1);
}

__device__ inline uint32_t absBits(float v) { return __float_as_uint(v) & 0x7fffffffu; }

// A group's step and what its codes are worked out with: a division by a step in [2^-80, 2^120] (every step
// of finite values above 2^-73) is a multiplication by its reciprocal and two corrections (divideBy): the
// IEEE division's own operand check cost a slow path a zero, and kept quantize at 37% of a copy on an H200.
struct Step {
  float s, r;
  bool exact;
  __device__ explicit Step(float step) : s(step), r(1.0f / step), exact(step >= 0x1p-80f && step <= 0x1p120f) {}
  __device__ float divide(float y) const { return exact ? divideBy(y, s, r) : y / s; }
};

// q = clamp(rhe(y / step)) as a float, as the CPU computes it: clamping first keeps a NaN at lo.
__device__ inline float codeOf(float y, const Step& step, float lo, float hi) {
  float v = step.divide(y);
  v = v > lo ? v : lo;
  v = v < hi ? v : hi;
  return rintf(v);
}

// The group's step from the warp's largest |value| (bits), stored before the codes; flags a non-finite
// group.
__device__ inline float stepOf(uint32_t m, uint32_t bits, uint8_t* out, uint64_t k, uint32_t* nonFinite) {
  const float s = m == 0 ? 1.0f : __uint_as_float(m) / float(1u << (bits - 1));
  if (laneIndex() == 0) {
    storeUnaligned(out + 4 * k, s);
    if (m >= kNonFinite) *nonFinite = 1;
  }
  return s;
}

// Source c's step of group k.
__device__ inline float sourceStep(const uint8_t* sources, uint64_t stride, uint32_t c, uint64_t k) {
  return loadUnaligned<float>(sources + c * stride + 4 * k);
}

// ------------------------------------------------------------------- any group, a value at a time

// Writes the codes of `value(i)` (i < g.len) with step s; keep(i, y - q·s) receives what each one lost.
template <class Value, class Keep>
__device__ void writeCodes(const QuantLayout& f, const Group& g, const Step& s, uint8_t* out, Value value, Keep keep) {
  const float half = float(1u << (f.bits - 1)), lo = -half, hi = half - 1;
  if (f.bits == 8) {
    for (uint64_t i = laneIndex(); i < g.len; i += 32) {
      const float y = value(i), q = codeOf(y, s, lo, hi);
      out[g.codes + i] = uint8_t(int8_t(int(q)));
      keep(i, y - q * s.s);
    }
    return;
  }
  for (uint64_t p = laneIndex(); p < g.len / 2; p += 32) {
    const float y0 = value(2 * p), y1 = value(2 * p + 1);
    const float q0 = codeOf(y0, s, lo, hi), q1 = codeOf(y1, s, lo, hi);
    out[g.codes + p] = pairByte(q0, q1);
    keep(2 * p, y0 - q0 * s.s);
    keep(2 * p + 1, y1 - q1 * s.s);
  }
}

// Quantizes group k from value(i), in two passes that each read it: with error feedback the values are
// value + beta·error, kept in error (a lane writes what other lanes read back in the second pass).
template <class Value>
__device__ void quantizeValues(const QuantLayout& f, const Group& g, uint64_t k, float* error, float beta, uint8_t* out,
                               uint32_t* nonFinite, Value value) {
  float* e = error ? error + g.at : nullptr;
  uint32_t m = 0;
  for (uint64_t i = laneIndex(); i < g.len; i += 32) {
    float y = value(i);
    if (e) e[i] = y = y + beta * e[i];
    m = max(m, absBits(y));
  }
  __syncwarp();
  const Step s(stepOf(warpMax(m), f.bits, out, k, nonFinite));
  if (e) {
    writeCodes(f, g, s, out, [&](uint64_t i) { return e[i]; }, [&](uint64_t i, float lost) { e[i] = lost; });
  } else {
    writeCodes(f, g, s, out, value, [](uint64_t, float) {});
  }
}

// Value i of group g summed over the sources in order, rounded after each addition.
__device__ inline float sumAt(const QuantLayout& f, const Group& g, const uint8_t* sources, uint64_t stride, uint32_t count,
                              uint64_t k, uint64_t i) {
  float acc = 0;
  for (uint32_t c = 0; c < count; ++c) {
    const float v = float(code(sources + c * stride + g.codes, i, f.bits)) * sourceStep(sources, stride, c, k);
    acc = c == 0 ? v : acc + v;
  }
  return acc;
}

// ------------------------------------------------------------------- whole groups from registers

// Groups of a multiple of kTile values, at most kMaxTiles·kTile (2048: the default), whose values and codes
// are aligned for 16- and 4-byte access, live in registers: each lane holds 4 values a tile, loaded or
// stored 16 bytes at a time, their codes 4 at a time. Every load of a group issues before its first use.
constexpr unsigned kTile = 4 * 32;
constexpr unsigned kMaxTiles = 16;
using Tiles = float4[kMaxTiles];

// Tiles of group g that take the register path, or 0: values16 says whether its values are aligned for
// 16-byte access, and codes (and `more`, where given) are where its codes go or come from.
__device__ inline unsigned tilesOf(const QuantLayout& f, const Group& g, bool values16, const uint8_t* codes,
                                   const uint8_t* more = nullptr) {
  const bool whole = g.len % kTile == 0 && g.len <= kMaxTiles * kTile;
  const bool codesAlign = aligned(codes, f.bits / 2) && (!more || aligned(more, f.bits / 2));
  return whole && values16 && codesAlign ? unsigned(g.len / kTile) : 0;
}

// This lane's 4 codes of tile t, as they lie in memory: 4 bytes of int8, or 2 of int4 pairs.
__device__ inline uint32_t loadCodes(const uint8_t* codes, unsigned t, uint32_t bits) {
  const uint64_t at = (t * 32 + laneIndex()) * (bits / 2);
  return bits == 8 ? *reinterpret_cast<const uint32_t*>(codes + at) : *reinterpret_cast<const uint16_t*>(codes + at);
}
__device__ inline void storeCodes(uint8_t* codes, unsigned t, uint32_t bits, uint32_t word) {
  const uint64_t at = (t * 32 + laneIndex()) * (bits / 2);
  if (bits == 8) *reinterpret_cast<uint32_t*>(codes + at) = word;
  else *reinterpret_cast<uint16_t*>(codes + at) = uint16_t(word);
}

// Code j < 4 of a lane's word.
__device__ inline int codeIn(uint32_t word, int j, uint32_t bits) {
  if (bits == 8) return int8_t(word >> (8 * j));
  return nibble(int8_t(word >> (8 * (j / 2))), j & 1);
}

// The word of 4 codes.
__device__ inline uint32_t packCodes(float q0, float q1, float q2, float q3, uint32_t bits) {
  if (bits == 8) return uint32_t(uint8_t(int(q0))) | uint32_t(uint8_t(int(q1))) << 8 | uint32_t(uint8_t(int(q2))) << 16 | uint32_t(uint8_t(int(q3))) << 24;
  return uint32_t(pairByte(q0, q1)) | uint32_t(pairByte(q2, q3)) << 8;
}


// v[0, tiles) = the sum of the sources' values of group g, in source order. Each source's codes are loaded
// for every tile before any is used: a source costs one wait, not one per tile.
__device__ void sumTiles(Tiles& v, unsigned tiles, const QuantLayout& f, const Group& g, uint64_t k, const uint8_t* sources,
                         uint64_t stride, uint32_t count) {
#pragma unroll
  for (unsigned t = 0; t < kMaxTiles; ++t) v[t] = make_float4(0, 0, 0, 0);
  for (uint32_t c = 0; c < count; ++c) {
    const uint8_t* codes = sources + c * stride + g.codes;
    const float s = sourceStep(sources, stride, c, k);
    uint32_t words[kMaxTiles];
#pragma unroll
    for (unsigned t = 0; t < kMaxTiles; ++t) {
      if (t < tiles) words[t] = loadCodes(codes, t, f.bits);
    }
#pragma unroll
    for (unsigned t = 0; t < kMaxTiles; ++t) {
      if (t >= tiles) continue;
      float x[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) x[j] = float(codeIn(words[t], j, f.bits)) * s;
      v[t] = c == 0 ? make_float4(x[0], x[1], x[2], x[3]) : make_float4(v[t].x + x[0], v[t].y + x[1], v[t].z + x[2], v[t].w + x[3]);
    }
  }
}

// Quantizes group k from v[0, tiles), adding beta·error first where error is given, and keeps what that lost.
__device__ void quantizeTiles(Tiles& v, unsigned tiles, const QuantLayout& f, const Group& g, uint64_t k, float* error,
                              float beta, uint8_t* out, uint32_t* nonFinite) {
  float4* e = error ? reinterpret_cast<float4*>(error + g.at) + laneIndex() : nullptr;
  uint32_t m = 0;
#pragma unroll
  for (unsigned t = 0; t < kMaxTiles; ++t) {
    if (t >= tiles) continue;
    if (e) {
      const float4 w = e[32 * t];
      v[t] = make_float4(v[t].x + beta * w.x, v[t].y + beta * w.y, v[t].z + beta * w.z, v[t].w + beta * w.w);
    }
    m = max(max(m, max(absBits(v[t].x), absBits(v[t].y))), max(absBits(v[t].z), absBits(v[t].w)));
  }
  const Step s(stepOf(warpMax(m), f.bits, out, k, nonFinite));
  const float half = float(1u << (f.bits - 1)), lo = -half, hi = half - 1;
#pragma unroll
  for (unsigned t = 0; t < kMaxTiles; ++t) {
    if (t >= tiles) continue;
    const float4 q = make_float4(codeOf(v[t].x, s, lo, hi), codeOf(v[t].y, s, lo, hi), codeOf(v[t].z, s, lo, hi),
                                 codeOf(v[t].w, s, lo, hi));
    storeCodes(out + g.codes, t, f.bits, packCodes(q.x, q.y, q.z, q.w, f.bits));
    if (e) e[32 * t] = make_float4(v[t].x - q.x * s.s, v[t].y - q.y * s.s, v[t].z - q.z * s.s, v[t].w - q.w * s.s);
  }
}

// ------------------------------------------------------------------- the kernels

__device__ void quantize(const QuantizeArgs& a) {
  forEachGroup(a.f, [&](const Group& g, uint64_t k) {
    const float* x = a.x + g.at;
    const bool values16 = aligned(x, 16) && (!a.error || aligned(a.error + g.at, 16));
    if (const unsigned tiles = tilesOf(a.f, g, values16, a.out + g.codes)) {
      Tiles v;
      const float4* x4 = reinterpret_cast<const float4*>(x) + laneIndex();
#pragma unroll
      for (unsigned t = 0; t < kMaxTiles; ++t) {
        if (t < tiles) v[t] = x4[32 * t];
      }
      quantizeTiles(v, tiles, a.f, g, k, a.error, a.beta, a.out, a.nonFinite);
      return;
    }
    quantizeValues(a.f, g, k, a.error, a.beta, a.out, a.nonFinite, [&](uint64_t i) { return x[i]; });
  });
}

// Whether every source's codes are aligned as the first's: the stride keeps their alignment.
__device__ inline bool strideKeeps(const QuantLayout& f, uint64_t stride, uint32_t count) {
  return count <= 1 || stride % (f.bits / 2) == 0;
}

__device__ void dequantizeSum(const DequantizeSumArgs& a) {
  const bool keeps = strideKeeps(a.f, a.stride, a.count);
  forEachGroup(a.f, [&](const Group& g, uint64_t k) {
    if (const unsigned tiles = keeps ? tilesOf(a.f, g, aligned(a.out + g.at, 16), a.sources + g.codes) : 0) {
      Tiles v;
      sumTiles(v, tiles, a.f, g, k, a.sources, a.stride, a.count);
      float4* out = reinterpret_cast<float4*>(a.out + g.at) + laneIndex();
#pragma unroll
      for (unsigned t = 0; t < kMaxTiles; ++t) {
        if (t < tiles) out[32 * t] = v[t];
      }
      return;
    }
    for (uint64_t i = laneIndex(); i < g.len; i += 32) a.out[g.at + i] = sumAt(a.f, g, a.sources, a.stride, a.count, k, i);
  });
}

// The sum of each group is quantized from registers: every source is read once and the codes written once.
// Summing twice (once for the absmax, again for the codes), a value and a code at a time, reached 7% of a
// copy's bandwidth on an H200.
__device__ void dequantizeSumQuantize(const DequantizeSumQuantizeArgs& a) {
  const bool keeps = strideKeeps(a.f, a.stride, a.count);
  forEachGroup(a.f, [&](const Group& g, uint64_t k) {
    // The sums live in registers: only the error feedback's values are in memory.
    const bool values16 = !a.error || aligned(a.error + g.at, 16);
    if (const unsigned tiles = keeps ? tilesOf(a.f, g, values16, a.sources + g.codes, a.out + g.codes) : 0) {
      Tiles v;
      sumTiles(v, tiles, a.f, g, k, a.sources, a.stride, a.count);
      quantizeTiles(v, tiles, a.f, g, k, a.error, a.beta, a.out, a.nonFinite);
      return;
    }
    quantizeValues(a.f, g, k, a.error, a.beta, a.out, a.nonFinite,
                   [&](uint64_t i) { return sumAt(a.f, g, a.sources, a.stride, a.count, k, i); });
  });
}

}  // namespace
}  // namespace spmd::kernels::cuda

using namespace spmd::kernels::cuda;

// At most 128 registers a thread, so that two blocks (16 groups) share an SM: a group's values held in
// registers took up to 146, one block an SM.
extern "C" __global__ void __launch_bounds__(kBlock, 2) spmd_quantize(QuantizeArgs a) { quantize(a); }
extern "C" __global__ void __launch_bounds__(kBlock, 2) spmd_dequantize_sum(DequantizeSumArgs a) { dequantizeSum(a); }
extern "C" __global__ void __launch_bounds__(kBlock, 2) spmd_dequantize_sum_quantize(DequantizeSumQuantizeArgs a) {
  dequantizeSumQuantize(a);
}
