// The layout of a block of quantized values (kernels/cpu/quant.h says what the steps and codes are): shared by
// the DeviceKernels interface and every implementation of it, so it sits beside the interface.
#pragma once
#include <cstddef>

namespace spmd::kernels {

struct QuantFormat {
  int bits = 8;           // 4 or 8
  size_t groupSize = 2048;  // even

  size_t groups(size_t n) const { return (n + groupSize - 1) / groupSize; }
  size_t codeBytes(size_t n) const { return n * size_t(bits) / 8; }
  // The stored size of n values: steps, then codes.
  size_t bytes(size_t n) const { return 4 * groups(n) + codeBytes(n); }
};

}  // namespace spmd::kernels
