// The quantized allreduce's kernels (kernels/device_kernels.h; the CPU's are kernels/cpu/quant.h): symmetric
// per-group quantization to int8 or int4 with optional error feedback, and sums of dequantized sources,
// fused with requantization. One thread block per group: a pass finds the group's absmax, a second writes
// the codes. The arithmetic is the CPU's operation for operation (IEEE division, round half to even, no
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

__device__ inline uint64_t groupsOf(const QuantLayout& f) { return (f.n + f.groupSize - 1) / f.groupSize; }

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

// q = clamp(rhe(y / step)) as a float, as the CPU computes it: clamping first keeps a NaN at lo.
__device__ inline float codeOf(float y, float step, float lo, float hi) {
  float v = y / step;
  v = v > lo ? v : lo;
  v = v < hi ? v : hi;
  return rintf(v);
}

// The group's step from the largest |value| (bits), stored before the codes; flags a non-finite group.
__device__ inline float stepOf(uint32_t m, uint32_t bits, uint8_t* out, uint64_t k, uint32_t* nonFinite) {
  const float s = m == 0 ? 1.0f : __uint_as_float(m) / float(1u << (bits - 1));
  if (threadIdx.x == 0) {
    storeUnaligned(out + 4 * k, s);
    if (m >= kNonFinite) *nonFinite = 1;
  }
  return s;
}

// Writes the codes of `value(i)` (i < g.len) with step s; keep(i, y - q·s) receives what each one lost.
template <class Value, class Keep>
__device__ void writeCodes(const QuantLayout& f, const Group& g, float s, uint8_t* out, Value value, Keep keep) {
  const float half = float(1u << (f.bits - 1)), lo = -half, hi = half - 1;
  if (f.bits == 8) {
    for (uint64_t i = threadIdx.x; i < g.len; i += blockDim.x) {
      const float y = value(i), q = codeOf(y, s, lo, hi);
      out[g.codes + i] = uint8_t(int8_t(int(q)));
      keep(i, y - q * s);
    }
    return;
  }
  for (uint64_t p = threadIdx.x; p < g.len / 2; p += blockDim.x) {
    const float y0 = value(2 * p), y1 = value(2 * p + 1);
    const float q0 = codeOf(y0, s, lo, hi), q1 = codeOf(y1, s, lo, hi);
    out[g.codes + p] = pairByte(q0, q1);
    keep(2 * p, y0 - q0 * s);
    keep(2 * p + 1, y1 - q1 * s);
  }
}

// Groups of 4·kBlock or 8·kBlock values (1024 or 2048: the default) whose values and codes are aligned for
// 16- and 4-byte access are quantized from registers: each thread loads its 4 or 8 values once, 16 bytes at
// a time, and writes their codes 4 at a time. The general loop reads each value twice (the absmax pass,
// then the codes) a float and a code at a time, and reached 27% of a copy's bandwidth on an H200.
constexpr unsigned kTile = 4 * kBlock;  // values per float4 a thread holds
constexpr unsigned kMaxTiles = 2;

// Codes of 4 values as they lie in memory: 4 bytes of int8, or 2 of int4 pairs (the first value high).
__device__ inline uint32_t packCodes(float q0, float q1, float q2, float q3, uint32_t bits) {
  if (bits == 8) return uint32_t(uint8_t(int(q0))) | uint32_t(uint8_t(int(q1))) << 8 | uint32_t(uint8_t(int(q2))) << 16 | uint32_t(uint8_t(int(q3))) << 24;
  return uint32_t(pairByte(q0, q1)) | uint32_t(pairByte(q2, q3)) << 8;
}

// Tiles of group g that take the register path, or 0 (codes: where the group's codes go or come from).
__device__ inline unsigned tilesOf(const QuantLayout& f, const Group& g, const void* values, const uint8_t* codes) {
  const bool whole = g.len % kTile == 0 && g.len <= kMaxTiles * kTile;
  return whole && aligned(values, 16) && aligned(codes, f.bits / 2) ? unsigned(g.len / kTile) : 0;
}

// quantize's register path for group k (tilesOf > 0, no error feedback). Loading the next group's values
// before working out this one's codes, to keep loads in flight across the group's barriers, gained
// nothing on an H200 and cost the feedback path a third of its speed (registers).
__device__ void quantizeTiles(const QuantizeArgs& a, const Group& g, uint64_t k, unsigned tiles) {
  const auto* x = reinterpret_cast<const float4*>(a.x + g.at);
  float4 v[kMaxTiles];
  uint32_t m = 0;
#pragma unroll
  for (unsigned t = 0; t < kMaxTiles; ++t) {
    if (t >= tiles) break;
    v[t] = x[t * kBlock + threadIdx.x];
    m = max(max(m, max(absBits(v[t].x), absBits(v[t].y))), max(absBits(v[t].z), absBits(v[t].w)));
  }
  const float s = stepOf(blockMax(m), a.f.bits, a.out, k, a.nonFinite);
  const float half = float(1u << (a.f.bits - 1)), lo = -half, hi = half - 1;
#pragma unroll
  for (unsigned t = 0; t < kMaxTiles; ++t) {
    if (t >= tiles) break;
    const uint32_t codes = packCodes(codeOf(v[t].x, s, lo, hi), codeOf(v[t].y, s, lo, hi), codeOf(v[t].z, s, lo, hi),
                                     codeOf(v[t].w, s, lo, hi), a.f.bits);
    const uint64_t at = g.codes + (t * kBlock + threadIdx.x) * (a.f.bits / 2);
    if (a.f.bits == 8) *reinterpret_cast<uint32_t*>(a.out + at) = codes;
    else *reinterpret_cast<uint16_t*>(a.out + at) = uint16_t(codes);
  }
}

__device__ void quantize(const QuantizeArgs& a) {
  for (uint64_t k = blockIdx.x; k < groupsOf(a.f); k += gridDim.x) {
    const Group g(a.f, k);
    const float* x = a.x + g.at;
    if (const unsigned tiles = a.error ? 0 : tilesOf(a.f, g, x, a.out + g.codes)) {
      quantizeTiles(a, g, k, tiles);
      continue;
    }
    float* e = a.error ? a.error + g.at : nullptr;
    uint32_t m = 0;
    for (uint64_t i = threadIdx.x; i < g.len; i += blockDim.x) {
      float y = x[i];
      if (e) e[i] = y = x[i] + a.beta * e[i];  // error feedback: quantize x + beta·error, kept in error
      m = max(m, absBits(y));
    }
    const float s = stepOf(blockMax(m), a.f.bits, a.out, k, a.nonFinite);
    if (e) {
      writeCodes(a.f, g, s, a.out, [&](uint64_t i) { return e[i]; }, [&](uint64_t i, float lost) { e[i] = lost; });
    } else {
      writeCodes(a.f, g, s, a.out, [&](uint64_t i) { return x[i]; }, [](uint64_t, float) {});
    }
    __syncthreads();
  }
}

// The sources' steps for group k, in shared memory.
__device__ float* loadSteps(const uint8_t* sources, uint64_t stride, uint32_t count, uint64_t k) {
  extern __shared__ __align__(16) unsigned char shared[];
  auto* steps = reinterpret_cast<float*>(shared);
  for (uint32_t c = threadIdx.x; c < count; c += blockDim.x) steps[c] = loadUnaligned<float>(sources + c * stride + 4 * k);
  __syncthreads();
  return steps;
}

// Value i of group g summed over the sources in order, rounded after each addition.
__device__ inline float sumAt(const QuantLayout& f, const Group& g, const uint8_t* sources, uint64_t stride, uint32_t count,
                              const float* steps, uint64_t i) {
  float acc = 0;
  for (uint32_t c = 0; c < count; ++c) {
    const float v = float(code(sources + c * stride + g.codes, i, f.bits)) * steps[c];
    acc = c == 0 ? v : acc + v;
  }
  return acc;
}

// Code j < 4 of packCodes' word.
__device__ inline int codeIn(uint32_t word, int j, uint32_t bits) {
  if (bits == 8) return int8_t(word >> (8 * j));
  return nibble(int8_t(word >> (8 * (j / 2))), j & 1);
}

// dequantizeSum's register path: 4 values a thread at a time, each source's codes read 4 at a time and
// the sums stored 16 bytes at a time, added in sumAt's order.
__device__ void dequantizeSumTiles(const DequantizeSumArgs& a, const Group& g, const float* steps, unsigned tiles) {
  const uint64_t codeBytes = a.f.bits / 2;
  for (unsigned t = 0; t < tiles; ++t) {
    const uint64_t q = t * kBlock + threadIdx.x;
    float acc[4];
    for (uint32_t c = 0; c < a.count; ++c) {
      const uint8_t* at = a.sources + c * a.stride + g.codes + q * codeBytes;
      const uint32_t word = a.f.bits == 8 ? *reinterpret_cast<const uint32_t*>(at) : *reinterpret_cast<const uint16_t*>(at);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float v = float(codeIn(word, j, a.f.bits)) * steps[c];
        acc[j] = c == 0 ? v : acc[j] + v;
      }
    }
    reinterpret_cast<float4*>(a.out + g.at)[q] = make_float4(acc[0], acc[1], acc[2], acc[3]);
  }
}

__device__ void dequantizeSum(const DequantizeSumArgs& a) {
  // Every source's codes aligned as the first's: the stride keeps their alignment.
  const bool strideKeeps = a.count == 1 || (a.count > 1 && a.stride % (a.f.bits / 2) == 0);
  for (uint64_t k = blockIdx.x; k < groupsOf(a.f); k += gridDim.x) {
    const Group g(a.f, k);
    const float* steps = loadSteps(a.sources, a.stride, a.count, k);
    if (const unsigned tiles = strideKeeps ? tilesOf(a.f, g, a.out + g.at, a.sources + g.codes) : 0) {
      dequantizeSumTiles(a, g, steps, tiles);
      __syncthreads();
      continue;
    }
    for (uint64_t i = threadIdx.x; i < g.len; i += blockDim.x) {
      a.out[g.at + i] = sumAt(a.f, g, a.sources, a.stride, a.count, steps, i);
    }
    __syncthreads();
  }
}

__device__ void dequantizeSumQuantize(const DequantizeSumQuantizeArgs& a) {
  for (uint64_t k = blockIdx.x; k < groupsOf(a.f); k += gridDim.x) {
    const Group g(a.f, k);
    const float* steps = loadSteps(a.sources, a.stride, a.count, k);
    auto sum = [&](uint64_t i) { return sumAt(a.f, g, a.sources, a.stride, a.count, steps, i); };
    float* e = a.error ? a.error + g.at : nullptr;
    uint32_t m = 0;
    for (uint64_t i = threadIdx.x; i < g.len; i += blockDim.x) {
      float y = sum(i);
      if (e) e[i] = y = y + a.beta * e[i];
      m = max(m, absBits(y));
    }
    const float s = stepOf(blockMax(m), a.f.bits, a.out, k, a.nonFinite);
    // The sums are recomputed rather than kept: the sources of one group sit in the cache.
    if (e) {
      writeCodes(a.f, g, s, a.out, [&](uint64_t i) { return e[i]; }, [&](uint64_t i, float lost) { e[i] = lost; });
    } else {
      writeCodes(a.f, g, s, a.out, sum, [](uint64_t, float) {});
    }
    __syncthreads();
  }
}

}  // namespace
}  // namespace spmd::kernels::cuda

using namespace spmd::kernels::cuda;

extern "C" __global__ void __launch_bounds__(kBlock) spmd_quantize(QuantizeArgs a) { quantize(a); }
extern "C" __global__ void __launch_bounds__(kBlock) spmd_dequantize_sum(DequantizeSumArgs a) { dequantizeSum(a); }
extern "C" __global__ void __launch_bounds__(kBlock) spmd_dequantize_sum_quantize(DequantizeSumQuantizeArgs a) {
  dequantizeSumQuantize(a);
}
