// DeviceKernels (kernels/device_kernels.h) on host memory: the CPU kernels themselves, which the host
// backends use. Stateless apart from per-thread scratch, so the lanes of one process may share it.
#pragma once
#include "kernels/device_kernels.h"

namespace spmd::kernels {

DeviceKernels& cpuKernels();

// The sums of squares behind the 1-bit kernels' scales (scale = sqrt(sum / len)), for a caller that takes
// the root itself, as a GPU's kernels do in a second pass:
//  - addAndScale's: x[i] += y[i] for i < n (y null: no add), then the sum of x[i]^2 over i < len;
//  - accumulateRecords': the accumulation, then the sum of the new acc[i]^2.
template <class T>
double addAndSumSquares(T* x, const T* y, size_t n, size_t len);
template <class T>
double accumulateRecordsSquares(Strided records, T divisor, T* acc, size_t n);

}  // namespace spmd::kernels
