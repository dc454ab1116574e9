// The CUDA kernels as nvcc built them: one fatbin per kernels/cuda/*.cu, embedded in the addon by a source
// that CMake writes at build time (native/cmake/embed_fatbins.cmake); none in a build without nvcc.
#pragma once
#include <cstddef>

namespace spmd::kernels::cuda {

struct Fatbin {
  const char* name;  // the .cu file's stem
  const unsigned char* data;
  size_t size;
};

extern const Fatbin kFatbins[];
extern const size_t kFatbinCount;
// What the fatbins hold, e.g. "sm_80 sm_90 compute_90"; "" in a build without nvcc.
extern const char* const kFatbinArchs;

}  // namespace spmd::kernels::cuda
