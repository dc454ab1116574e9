// DeviceKernels (kernels/device_kernels.h) on an NVIDIA GPU: the kernels of kernels/cuda/*.cu, which nvcc
// compiled into fatbins embedded in the addon (kernels/cuda/fatbins.h), loaded into the calling thread's
// current CUDA context and launched on the communicator's stream through the driver API (cuda_driver.h).
#pragma once
#include <memory>
#include <span>

#include "backends/library/library.h"
#include "kernels/memory.h"
#include "kernels/cuda/fatbins.h"

namespace spmd::library {

// The fatbins this build embeds (none without nvcc).
std::span<const kernels::cuda::Fatbin> builtFatbins();

// Kernels that work in `memory` (a CUDA device's) and run on `stream`. Throws CommError kUnsupported when
// there are no `images` (a build without nvcc), libcuda.so.1 cannot be loaded, or the images hold no code
// this GPU runs; kDevice when the driver fails otherwise.
std::unique_ptr<kernels::DeviceKernels> makeCudaKernels(Memory& memory, Stream stream,
                                                        std::span<const kernels::cuda::Fatbin> images = builtFatbins());

}  // namespace spmd::library
