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
