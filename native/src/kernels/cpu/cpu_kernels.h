// DeviceKernels (kernels/device_kernels.h) on host memory: the CPU kernels themselves. Host backends and the
// test doubles' host "device" memory use it. Stateless apart from per-thread scratch, so the lanes of one
// process may share it.
#pragma once
#include "kernels/device_kernels.h"

namespace spmd::kernels {

DeviceKernels& cpuKernels();

}  // namespace spmd::kernels
