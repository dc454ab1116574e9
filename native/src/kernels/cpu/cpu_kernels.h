// DeviceKernels (kernels/device_kernels.h) on host memory: the CPU kernels themselves, which the host
// backends use. Stateless apart from per-thread scratch, so the lanes of one process may share it.
#pragma once
#include "kernels/device_kernels.h"

namespace spmd::kernels {

DeviceKernels& cpuKernels();

// The sums of squares behind the 1-bit kernels' scales, for a caller that takes the root itself (rms):
//  - addAndScale's: x[i] += y[i] for i < n (y null: no add), then the sum of x[i]^2 over i < len;
//  - accumulateRecords': the accumulation, then `squares` plus the sum of the new acc[i]^2, which carries
//    the sum from one piece of a chunk to the next as onebit.h's accumulateSigns says.
template <class T>
double addAndSumSquares(T* x, const T* y, size_t n, size_t len);
template <class T>
double accumulateRecordsSquares(Strided records, T divisor, T* acc, size_t n, double squares);

// Outputs from which unpackRecords streams past the cache: well beyond a core's L2 (2 MiB on the machines
// measured), where plain stores would read every line from memory before writing it.
constexpr size_t kStreamBytes = size_t(4) << 20;

// *scale = sqrt(squares / len), rounded to T; *nonFinite = 1 when that is not finite (unless null).
template <class T>
void rms(double squares, size_t len, T* scale, uint32_t* nonFinite);

}  // namespace spmd::kernels
