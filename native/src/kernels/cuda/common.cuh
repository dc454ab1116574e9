// Helpers of the CUDA kernels: unaligned loads and stores (records and steps sit at any byte offset, as on
// the wire), vector access to streams of values, and block- and warp-wide reductions.
#pragma once
#include <cstdint>

#include "kernels/cuda/kernel_args.h"

namespace spmd::kernels::cuda {

template <class T>
__device__ inline T loadUnaligned(const uint8_t* p) {
  T v;
  memcpy(&v, p, sizeof v);
  return v;
}

template <class T>
__device__ inline void storeUnaligned(uint8_t* p, T v) {
  memcpy(p, &v, sizeof v);
}

__device__ inline bool aligned(const void* p, uintptr_t bytes) { return (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) == 0; }

// Loads each thread issues before it stores their results. With one load in flight per thread the
// streaming kernels kept too few bytes in flight: toF32 bfloat16 went from 68% to 75% of a device-to-device
// copy on an H200 with 4 (divideInPlace did not move: its IEEE division keeps the SM busy).
constexpr int kUnroll = 4;

// store(i, load(i)) for every i < n this thread takes when the whole grid shares the range in tiles of
// kUnroll × blockDim.x elements: consecutive threads take consecutive elements (coalesced), and each
// thread's kUnroll loads issue before its stores.
template <class Load, class Store>
__device__ inline void streamGrid(uint64_t n, Load load, Store store) {
  using V = decltype(load(uint64_t(0)));
  const uint64_t width = blockDim.x, lanes = uint64_t(gridDim.x) * width;
  for (uint64_t base = blockIdx.x * width * kUnroll + threadIdx.x; base < n; base += lanes * kUnroll) {
    V v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (base + u * width < n) v[u] = load(base + u * width);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (base + u * width < n) store(base + u * width, v[u]);
    }
  }
}

// E consecutive values of T moved as one access (16 bytes), or as several 16-byte ones where they are more:
// a thread's share of a vector load or store.
template <class T, int E>
struct alignas(sizeof(T) * E < 16 ? sizeof(T) * E : 16) Pack {
  T v[E];
};

// dst[i] = f(src[i]) for i < n (dst may be src): E values a thread at a time where both are aligned for it,
// the rest (everything, where they are not) one at a time. Accesses of 2 or 4 bytes kept too few bytes in
// flight, and cost an instruction each: the conversions reached 71-76% of a copy's bandwidth on an H200.
template <int E, class Src, class Dst, class F>
__device__ inline void mapElements(const Src* src, Dst* dst, uint64_t n, F f) {
  using In = Pack<Src, E>;
  using Out = Pack<Dst, E>;
  uint64_t done = 0;
  if (aligned(src, alignof(In)) && aligned(dst, alignof(Out))) {
    done = n / E * E;
    streamGrid(
        n / E, [&](uint64_t p) { return reinterpret_cast<const In*>(src)[p]; },
        [&](uint64_t p, const In& in) {
          Out out;
#pragma unroll
          for (int j = 0; j < E; ++j) out.v[j] = f(in.v[j]);
          reinterpret_cast<Out*>(dst)[p] = out;
        });
  }
  streamGrid(n - done, [&](uint64_t i) { return src[done + i]; }, [&](uint64_t i, Src v) { dst[done + i] = f(v); });
}

// RN(y / d), given r = RN(1 / d), without a division: a quotient from the reciprocal and two corrections by
// exact remainders (Markstein), the sequence CUDA's own division runs after working out the reciprocal and
// checking its operands. That check sends a zero or tiny dividend down a slow path; the callers know their
// operands' range instead. The remainders are exact, and so the quotient correctly rounded, while d lies in
// [2^-20, 2^20] and |y| in [2^-60, 2^100], or d in [2^-80, 2^120] and the caller only rounds quotients
// within 2^8 of 0 to integers; checked against IEEE division on 2·10^8 random operands of both kinds. The
// quotient is a zero where y is, of either sign; divideBy gives it y's sign, as division does.
__device__ inline float quotientBy(float y, float d, float r) {
  float q = y * r;
  q = __fmaf_rn(__fmaf_rn(-d, q, y), r, q);
  return __fmaf_rn(__fmaf_rn(-d, q, y), r, q);
}
__device__ inline float divideBy(float y, float d, float r) { return copysignf(quotientBy(y, d, r), y); }

// The sum of every thread's v, in thread 0 (a fixed order for a given launch, so results repeat exactly).
__device__ inline double blockSum(double v) {
  __shared__ double warps[kBlock / 32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) warps[threadIdx.x >> 5] = v;
  __syncthreads();
  v = threadIdx.x < kBlock / 32 ? warps[threadIdx.x] : 0.0;
  if (threadIdx.x < 32) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  }
  __syncthreads();  // warps[] is free for the next call
  return v;
}

// The largest of every lane's v, in every lane of the warp.
__device__ inline uint32_t warpMax(uint32_t v) {
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The largest of every thread's v, in every thread of the block.
__device__ inline uint32_t blockMax(uint32_t v) {
  __shared__ uint32_t warps[kBlock / 32];
  v = warpMax(v);
  if ((threadIdx.x & 31) == 0) warps[threadIdx.x / 32] = v;
  __syncthreads();
  const unsigned lane = threadIdx.x & 31;
  v = warpMax(lane < kBlock / 32 ? warps[lane] : 0u);
  __syncthreads();  // warps[] is free for the next call
  return v;
}

}  // namespace spmd::kernels::cuda
