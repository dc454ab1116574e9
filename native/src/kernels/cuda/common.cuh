// Helpers of the CUDA kernels: unaligned loads and stores (records and steps sit at any byte offset, as on
// the wire) and block-wide reductions for kBlock threads.
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

// The largest of every thread's v, in every thread.
__device__ inline uint32_t blockMax(uint32_t v) {
  __shared__ uint32_t warps[kBlock / 32];
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_down_sync(0xffffffffu, v, o));
  if ((threadIdx.x & 31) == 0) warps[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = threadIdx.x < kBlock / 32 ? warps[threadIdx.x] : 0u;
    for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_down_sync(0xffffffffu, v, o));
    if (threadIdx.x == 0) warps[0] = v;
  }
  __syncthreads();
  v = warps[0];
  __syncthreads();
  return v;
}

}  // namespace spmd::kernels::cuda
