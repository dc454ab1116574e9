// The quantized allreduce's kernels (kernels/device_kernels.h; the CPU's are kernels/cpu/quant.h): symmetric
// per-group quantization to int8 or int4 with optional error feedback, and sums of dequantized sources,
// fused with requantization. A team of threads per group (a block or a warp): it finds the group's absmax,
// then writes the codes. The arithmetic is the CPU's operation for operation (IEEE division, round half to even, no
// fused multiply-add: the build passes -fmad=false), so codes, steps and sums are the same bits.
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/quant_format.h"

namespace spmd::kernels::cuda {
namespace {

// Group k of a block of `groups`: where it starts, its length, where its codes are.
struct Group {
  uint64_t at, len, codes;
  __device__ Group(const QuantLayout& f, uint64_t groups, uint64_t k) {
    at = k * f.groupSize;
    len = min(f.groupSize, f.n - at);
    codes = 4 * groups + at * f.bits / 8;
  }
};

// The threads that work on one group together: a warp (no barrier for the group's absmax), or a block (a
// group of 2048 values in 8 registers a thread), each holding Tiles tiles (4 values a thread) in registers at
// once. Measured on an H200 against a copy's bandwidth: quantize with a block a group 91-95%, with a warp 73%
// (a group read twice; held in registers, 64 a lane, it left 16 warps an SM: 62%); dequantizeSum of 2
// sources 75% with a block, 86-88% with a warp. dequantizeSumQuantize turns over more values per byte than
// either, and what a thread does once a group (the group's place, the absmax, the step and its reciprocal)
// counts against fewer values in a larger team: with the whole group in registers, 34% with a block (8
// values a thread), 41-50% with four warps (16), 51-59% with two (32, named barriers), 64% with one (64
// values a lane, 128 registers, 16 warps an SM); a warp reading it twice, 4 tiles at a time, 32%.
template <unsigned Threads, unsigned Tiles>
struct Team {
  static_assert(Threads == 32 || Threads == kBlock, "a warp or a block");
  static constexpr unsigned kSize = Threads;
  static constexpr unsigned kChunk = Tiles;
  // A block's written apart: the compiler does not know that threadIdx.x < kBlock, and the arithmetic cost
  // spmd_quantize registers it spilled.
  __device__ static unsigned rank() { return Threads == kBlock ? threadIdx.x : threadIdx.x % Threads; }
  __device__ static uint64_t first() { return Threads == kBlock ? blockIdx.x : blockIdx.x * uint64_t(kBlock / Threads) + threadIdx.x / Threads; }
  __device__ static uint64_t stride() { return uint64_t(gridDim.x) * (kBlock / Threads); }
  __device__ static void sync() {
    if constexpr (Threads == 32) __syncwarp();
    else __syncthreads();
  }
  // The largest of the team's v, in every thread of the team.
  __device__ static uint32_t max(uint32_t v) {
    if constexpr (Threads == 32) return warpMax(v);
    else return blockMax(v);
  }
};
// dequantizeSum's team streams a group 4 tiles at a time; quantize's and dequantizeSumQuantize's hold a whole
// group of 2048 values.
using WarpTeam = Team<32, 4>;
using BlockTeam = Team<kBlock, 2>;
using SumQuantizeTeam = Team<32, 16>;

// work(group, k) for each group k a team of the grid takes. The count of groups is worked out once: a 64-bit
// division is a hundred instructions, and a block's thread has 8 values of a group to spread them over.
template <class Team, class Work>
__device__ void forEachGroup(const QuantLayout& f, Work work) {
  const uint64_t groups = (f.n + f.groupSize - 1) / f.groupSize;
  for (uint64_t k = Team::first(); k < groups; k += Team::stride()) work(Group(f, groups, k), k);
}

// The int4 code in byte b: the high nibble for the first value of a pair, the low one for the second.
__device__ inline int nibble(int8_t b, bool second) { return second ? int8_t(b << 4) >> 4 : b >> 4; }
// The byte of an int4 pair (the first value high), from their codes' low bits (Step::code).
__device__ inline uint8_t pairByte(uint32_t c0, uint32_t c1) { return uint8_t((c0 << 4) | (c1 & 0x0f)); }

// Value i of a group's codes (int4: value 2k in the high nibble of byte k).
__device__ inline int code(const uint8_t* codes, uint64_t i, uint32_t bits) {
  if (bits == 8) return int8_t(codes[i]);
  return nibble(int8_t(codes[i / 2]), i & 1);
}

__device__ inline uint32_t absBits(float v) { return __float_as_uint(v) & 0x7fffffffu; }

// A group's step and its codes: q = clamp(rhe(y / step)) held as q + kRoundHalfEven, the CPU's rounding
// (codeTile), whose low byte or nibble is the code: rintf and a conversion to an integer each go through the
// SM's quarter-rate conversion unit, and with two more for the sums' codes they held dequantizeSumQuantize at
// 28% of a copy's bandwidth on an H200. A division by a step in [2^-80, 2^120] (every step of finite values
// above 2^-73) is a multiplication by its reciprocal and two corrections (quotientBy): the IEEE division's
// operand check sends zeros down a slow path, which held quantize of zeros at 37%. There every |y| is at most
// the group's absmax, so y / step lies in [lo, hi + 1] and only hi clamps. Clamping first keeps a NaN at lo
// (as fmaxf does: it returns the operand that is not NaN). The sign of a zero quotient is lost in the
// rounding, as the CPU's is.
struct Step {
  float s, r;
  bool exact;
  __device__ explicit Step(float step) : s(step), r(1.0f / step), exact(step >= 0x1p-80f && step <= 0x1p120f) {}
  // Exact: what this->exact says, known at compile time where a loop is written once for each.
  template <bool Exact>
  __device__ float code(float y, float lo, float hi) const {
    if constexpr (Exact) return fminf(quotientBy(y, s, r), hi) + kRoundHalfEven;
    return fminf(fmaxf(y / s, lo), hi) + kRoundHalfEven;
  }
  __device__ float code(float y, float lo, float hi) const { return exact ? code<true>(y, lo, hi) : code<false>(y, lo, hi); }
  // What y loses to its code c.
  __device__ float lost(float y, float c) const { return y - (c - kRoundHalfEven) * s; }
};

// The group's step from the team's largest |value| (bits), stored before the codes; flags a non-finite
// group.
template <class Team>
__device__ inline Step stepOf(uint32_t m, uint32_t bits, uint8_t* out, uint64_t k, uint32_t* nonFinite) {
  m = Team::max(m);
  // m · 2^-(b-1): the product is as correctly rounded as the CPU's quotient m / 2^(b-1), without a division.
  const float s = m == 0 ? 1.0f : __uint_as_float(m) * __uint_as_float(uint32_t(127 - (bits - 1)) << 23);
  if (Team::rank() == 0) {
    storeUnaligned(out + 4 * k, s);
    if (m >= kNonFinite) *nonFinite = 1;
  }
  return Step(s);
}

// Source c's step of group k: one load where it is aligned. (As a plain load the compiler merged it with the
// unaligned one into four byte loads; __ldg keeps them apart. The sources are not written while a kernel
// reads them.)
__device__ inline float sourceStep(const uint8_t* sources, uint64_t stride, uint32_t c, uint64_t k) {
  const uint8_t* at = sources + c * stride + 4 * k;
  return aligned(at, 4) ? __ldg(reinterpret_cast<const float*>(at)) : loadUnaligned<float>(at);
}

// ------------------------------------------------------------------- any group, a value at a time

// Writes the codes of `value(i)` (i < g.len) with step s; keep(i, y - q·s) receives what each one lost.
template <class Team, class Value, class Keep>
__device__ void writeCodes(const QuantLayout& f, const Group& g, const Step& s, uint8_t* out, Value value, Keep keep) {
  const float half = float(1u << (f.bits - 1)), lo = -half, hi = half - 1;
  if (f.bits == 8) {
    for (uint64_t i = Team::rank(); i < g.len; i += Team::kSize) {
      const float y = value(i), c = s.code(y, lo, hi);
      out[g.codes + i] = uint8_t(__float_as_uint(c));
      keep(i, s.lost(y, c));
    }
    return;
  }
  for (uint64_t p = Team::rank(); p < g.len / 2; p += Team::kSize) {
    const float y0 = value(2 * p), y1 = value(2 * p + 1);
    const float c0 = s.code(y0, lo, hi), c1 = s.code(y1, lo, hi);
    out[g.codes + p] = pairByte(__float_as_uint(c0), __float_as_uint(c1));
    keep(2 * p, s.lost(y0, c0));
    keep(2 * p + 1, s.lost(y1, c1));
  }
}

// Quantizes group k from value(i), in two passes that each read it: with error feedback the values are
// value + beta·error, kept in error (a thread writes what other threads read back in the second pass).
template <class Team, class Value>
__device__ void quantizeValues(const QuantLayout& f, const Group& g, uint64_t k, float* error, float beta, uint8_t* out,
                               uint32_t* nonFinite, Value value) {
  float* e = error ? error + g.at : nullptr;
  uint32_t m = 0;
  for (uint64_t i = Team::rank(); i < g.len; i += Team::kSize) {
    float y = value(i);
    if (e) e[i] = y = y + beta * e[i];
    m = max(m, absBits(y));
  }
  Team::sync();
  const Step s = stepOf<Team>(m, f.bits, out, k, nonFinite);
  if (e) {
    writeCodes<Team>(f, g, s, out, [&](uint64_t i) { return e[i]; }, [&](uint64_t i, float lost) { e[i] = lost; });
  } else {
    writeCodes<Team>(f, g, s, out, value, [](uint64_t, float) {});
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

// ------------------------------------------------------------------- whole groups, 16 bytes at a time

// Groups of a multiple of a tile (4 values a thread of the team), at most kMaxValues (the default), whose
// values and codes are aligned for 16- and 4-byte access, go kChunk tiles at a time: a thread loads its 4
// values (or their codes) 16 (4) bytes at a time, kChunk loads in flight before the first is used. A team
// that quantizes holds its whole group in one chunk, and so reads it once.
constexpr unsigned kMaxValues = 2048;

template <class Team>
constexpr unsigned kTile = 4 * Team::kSize;
// No more tiles than a team's largest group has: the slots of a chunk beyond the tiles it holds are
// predicated off, but their instructions still issue. Four slots for a block's two tiles doubled quantize's
// instructions (63% of a copy's bandwidth on an H200, against 97% with two).
template <class Team>
constexpr unsigned kChunk = Team::kChunk;
template <class Team>
using Chunk = float4[kChunk<Team>];

// Tiles of group g that take this path, or 0: values16 says whether its values are aligned for 16-byte
// access, and codes (and `more`, where given) are where its codes go or come from.
template <class Team>
__device__ inline unsigned tilesOf(const QuantLayout& f, const Group& g, bool values16, const uint8_t* codes,
                                   const uint8_t* more = nullptr) {
  const bool whole = g.len % kTile<Team> == 0 && g.len <= kMaxValues;
  const bool codesAlign = aligned(codes, f.bits / 2) && (!more || aligned(more, f.bits / 2));
  return whole && values16 && codesAlign ? unsigned(g.len / kTile<Team>) : 0;
}

// Where this thread's 4 values of tile t are, counted in 4-value units from the group's start.
template <class Team>
__device__ inline uint64_t quad(unsigned t) {
  return uint64_t(t) * Team::kSize + Team::rank();
}

// This thread's 4 codes of tile t, as they lie in memory: 4 bytes of int8, or 2 of int4 pairs.
template <class Team>
__device__ inline uint32_t loadCodes(const uint8_t* codes, unsigned t, uint32_t bits) {
  const uint64_t at = quad<Team>(t) * (bits / 2);
  return bits == 8 ? *reinterpret_cast<const uint32_t*>(codes + at) : *reinterpret_cast<const uint16_t*>(codes + at);
}
template <class Team>
__device__ inline void storeCodes(uint8_t* codes, unsigned t, uint32_t bits, uint32_t word) {
  const uint64_t at = quad<Team>(t) * (bits / 2);
  if (bits == 8) *reinterpret_cast<uint32_t*>(codes + at) = word;
  else *reinterpret_cast<uint16_t*>(codes + at) = uint16_t(word);
}

// A thread's word with each code biased to an unsigned one, c + 2^(b-1), as codeIn reads them.
__device__ inline uint32_t biased(uint32_t word, uint32_t bits) { return word ^ (bits == 8 ? 0x80808080u : 0x8888u); }

// Code j < 4 of a biased word as a float, exactly and without a conversion instruction (Step says why):
// the biased code in the low mantissa bits of 2^23, less 2^23 and the bias.
__device__ inline float codeIn(uint32_t biased, int j, uint32_t bits) {
  if (bits == 8) return __uint_as_float(__byte_perm(biased, 0x4b000000u, 0x7540u | j)) - 0x1.0001p23f;
  const uint32_t nibble = biased >> (8 * (j / 2) + 4 * (1 - (j & 1))) & 0xfu;
  return __uint_as_float(0x4b000000u | nibble) - 0x1.00001p23f;
}

// The word of 4 codes as Step::code gives them.
__device__ inline uint32_t packCodes(float4 c, uint32_t bits) {
  const uint32_t c0 = __float_as_uint(c.x), c1 = __float_as_uint(c.y), c2 = __float_as_uint(c.z), c3 = __float_as_uint(c.w);
  if (bits == 8) return __byte_perm(__byte_perm(c0, c1, 0x0040u), __byte_perm(c2, c3, 0x0040u), 0x5410u);
  return uint32_t(pairByte(c0, c1)) | uint32_t(pairByte(c2, c3)) << 8;
}

// The group's tiles kChunk at a time: fill(t0, n, v) puts tiles t0 .. t0 + n - 1 into v, then use(t0, n, v).
template <class Team, class Fill, class Use>
__device__ void forChunks(unsigned tiles, Fill fill, Use use) {
  for (unsigned t0 = 0; t0 < tiles; t0 += kChunk<Team>) {
    const unsigned n = min(kChunk<Team>, tiles - t0);
    Chunk<Team> v;
    fill(t0, n, v);
    use(t0, n, v);
  }
}

// v[0, n) = tiles t0 .. t0 + n - 1 of group g summed over the sources in source order. Each source's words
// load before any is used: a source costs one wait a chunk, not one a tile. The sums start at +0, so the
// first source's values come out as they are (a product of a code and a positive step is never -0; a NaN
// may come out as another NaN) without a select on every value between storing and adding.
template <class Team>
__device__ void sumChunk(Chunk<Team>& v, unsigned t0, unsigned n, const QuantLayout& f, const Group& g, uint64_t k,
                         const uint8_t* sources, uint64_t stride, uint32_t count) {
#pragma unroll
  for (unsigned u = 0; u < kChunk<Team>; ++u) v[u] = make_float4(0, 0, 0, 0);
  for (uint32_t c = 0; c < count; ++c) {
    const uint8_t* codes = sources + c * stride + g.codes;
    const float s = sourceStep(sources, stride, c, k);
    uint32_t words[kChunk<Team>];
#pragma unroll
    for (unsigned u = 0; u < kChunk<Team>; ++u) {
      if (u < n) words[u] = biased(loadCodes<Team>(codes, t0 + u, f.bits), f.bits);
    }
#pragma unroll
    for (unsigned u = 0; u < kChunk<Team>; ++u) {
      if (u >= n) continue;
      float x[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) x[j] = codeIn(words[u], j, f.bits) * s;
      v[u] = make_float4(v[u].x + x[0], v[u].y + x[1], v[u].z + x[2], v[u].w + x[3]);
    }
  }
}

__device__ inline uint32_t absMax4(uint32_t m, float4 v) {
  return max(max(m, max(absBits(v.x), absBits(v.y))), max(absBits(v.z), absBits(v.w)));
}

// Quantizes group k, whose `tiles` tiles fill(0, tiles, v) puts into one chunk (as forChunks takes it). With
// error feedback the values are value + beta·error, and error becomes what their codes lost.
template <class Team, class Fill>
__device__ void quantizeTiles(unsigned tiles, const QuantLayout& f, const Group& g, uint64_t k, float* error, float beta,
                              uint8_t* out, uint32_t* nonFinite, Fill fill) {
  static_assert(kMaxValues / kTile<Team> <= kChunk<Team>, "a team that quantizes holds its whole group");
  float4* e = error ? reinterpret_cast<float4*>(error + g.at) + Team::rank() : nullptr;
  const float half = float(1u << (f.bits - 1)), lo = -half, hi = half - 1;
  // The codes are written once for each kind of division, so that no value tests which one it takes.
  auto emit = [&](const Step& s, auto exact, unsigned n, Chunk<Team>& v) {
    constexpr bool kExact = decltype(exact)::value;
#pragma unroll
    for (unsigned u = 0; u < kChunk<Team>; ++u) {
      if (u >= n) continue;
      const float4 c = make_float4(s.code<kExact>(v[u].x, lo, hi), s.code<kExact>(v[u].y, lo, hi), s.code<kExact>(v[u].z, lo, hi),
                                   s.code<kExact>(v[u].w, lo, hi));
      storeCodes<Team>(out + g.codes, u, f.bits, packCodes(c, f.bits));
      if (e) e[u * Team::kSize] = make_float4(s.lost(v[u].x, c.x), s.lost(v[u].y, c.y), s.lost(v[u].z, c.z), s.lost(v[u].w, c.w));
    }
  };
  auto whole = [&](unsigned n) {
    Chunk<Team> v;
    fill(0, n, v);
    uint32_t m = 0;
#pragma unroll
    for (unsigned u = 0; u < kChunk<Team>; ++u) {
      if (u >= n) continue;
      if (e) {
        const float4 w = e[u * Team::kSize];
        v[u] = make_float4(v[u].x + beta * w.x, v[u].y + beta * w.y, v[u].z + beta * w.z, v[u].w + beta * w.w);
      }
      m = absMax4(m, v[u]);
    }
    const Step s = stepOf<Team>(m, f.bits, out, k, nonFinite);
    if (s.exact) emit(s, std::true_type(), n, v);
    else emit(s, std::false_type(), n, v);
  };
  // A full chunk with its count of tiles a constant, so that no tile tests whether the group has it.
  if (tiles == kChunk<Team>) whole(kChunk<Team>);
  else whole(tiles);
}

// ------------------------------------------------------------------- the kernels, for either team

template <class Team>
__device__ void quantize(const QuantizeArgs& a) {
  forEachGroup<Team>(a.f, [&](const Group& g, uint64_t k) {
    const float* x = a.x + g.at;
    const bool values16 = aligned(x, 16) && (!a.error || aligned(a.error + g.at, 16));
    if (const unsigned tiles = tilesOf<Team>(a.f, g, values16, a.out + g.codes)) {
      const float4* x4 = reinterpret_cast<const float4*>(x) + Team::rank();
      quantizeTiles<Team>(tiles, a.f, g, k, a.error, a.beta, a.out, a.nonFinite, [&](unsigned t0, unsigned n, Chunk<Team>& v) {
#pragma unroll
        for (unsigned u = 0; u < kChunk<Team>; ++u) {
          if (u < n) v[u] = x4[(t0 + u) * Team::kSize];
        }
      });
      return;
    }
    quantizeValues<Team>(a.f, g, k, a.error, a.beta, a.out, a.nonFinite, [&](uint64_t i) { return x[i]; });
  });
}

// Whether every source's codes are aligned as the first's: the stride keeps their alignment.
__device__ inline bool strideKeeps(const QuantLayout& f, uint64_t stride, uint32_t count) {
  return count <= 1 || stride % (f.bits / 2) == 0;
}

template <class Team>
__device__ void dequantizeSum(const DequantizeSumArgs& a) {
  const bool keeps = strideKeeps(a.f, a.stride, a.count);
  forEachGroup<Team>(a.f, [&](const Group& g, uint64_t k) {
    if (const unsigned tiles = keeps ? tilesOf<Team>(a.f, g, aligned(a.out + g.at, 16), a.sources + g.codes) : 0) {
      float4* out = reinterpret_cast<float4*>(a.out + g.at) + Team::rank();
      forChunks<Team>(
          tiles, [&](unsigned t0, unsigned n, Chunk<Team>& v) { sumChunk<Team>(v, t0, n, a.f, g, k, a.sources, a.stride, a.count); },
          [&](unsigned t0, unsigned n, Chunk<Team>& v) {
#pragma unroll
            for (unsigned u = 0; u < kChunk<Team>; ++u) {
              if (u < n) out[(t0 + u) * Team::kSize] = v[u];
            }
          });
      return;
    }
    for (uint64_t i = Team::rank(); i < g.len; i += Team::kSize) a.out[g.at + i] = sumAt(a.f, g, a.sources, a.stride, a.count, k, i);
  });
}

template <class Team>
__device__ void dequantizeSumQuantize(const DequantizeSumQuantizeArgs& a) {
  const bool keeps = strideKeeps(a.f, a.stride, a.count);
  forEachGroup<Team>(a.f, [&](const Group& g, uint64_t k) {
    // The sums live in registers: only the error feedback's values are in memory.
    const bool values16 = !a.error || aligned(a.error + g.at, 16);
    if (const unsigned tiles = keeps ? tilesOf<Team>(a.f, g, values16, a.sources + g.codes, a.out + g.codes) : 0) {
      quantizeTiles<Team>(tiles, a.f, g, k, a.error, a.beta, a.out, a.nonFinite, [&](unsigned t0, unsigned n, Chunk<Team>& v) {
        sumChunk<Team>(v, t0, n, a.f, g, k, a.sources, a.stride, a.count);
      });
      return;
    }
    quantizeValues<Team>(a.f, g, k, a.error, a.beta, a.out, a.nonFinite,
                         [&](uint64_t i) { return sumAt(a.f, g, a.sources, a.stride, a.count, k, i); });
  });
}

}  // namespace
}  // namespace spmd::kernels::cuda

using namespace spmd::kernels::cuda;

// kernel(a) with a.f.bits a constant the compiler sees: no value then tests which width it has, and the
// registers that the tests held are free.
template <class Args, class Kernel>
__device__ void forBits(Args a, Kernel kernel) {
  if (a.f.bits == 8) {
    a.f.bits = 8;
    kernel(a);
  } else {
    a.f.bits = 4;
    kernel(a);
  }
}

// kernel(a) with whether a.error is null known to the compiler: no tile then tests it.
template <class Args, class Kernel>
__device__ void forFeedback(Args a, Kernel kernel) {
  if (a.error) return kernel(a);
  a.error = nullptr;
  kernel(a);
}

// The teams as kernel_args.h's k*GroupsPerBlock say. spmd_quantize takes at most 32 registers a thread, so
// that eight blocks share an SM (54 unbounded); spmd_dequantize_sum at most 64, so that four blocks (32 groups)
// do; spmd_dequantize_sum_quantize, whose lanes hold 64 sums each, 128 (two blocks, 16 groups: with 80 it
// spilled).
extern "C" __global__ void __launch_bounds__(kBlock, 8) spmd_quantize(QuantizeArgs a) {
  forBits(a, [](const QuantizeArgs& b) { quantize<BlockTeam>(b); });
}
extern "C" __global__ void __launch_bounds__(kBlock, 4) spmd_dequantize_sum(DequantizeSumArgs a) {
  forBits(a, [](const DequantizeSumArgs& b) { dequantizeSum<WarpTeam>(b); });
}
extern "C" __global__ void __launch_bounds__(kBlock, kSumQuantizeBlocksPerSm) spmd_dequantize_sum_quantize(DequantizeSumQuantizeArgs a) {
  forBits(a, [](const DequantizeSumQuantizeArgs& b) {
    forFeedback(b, [](const DequantizeSumQuantizeArgs& c) { dequantizeSumQuantize<SumQuantizeTeam>(c); });
  });
}
