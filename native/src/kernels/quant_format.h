// The layout of a block of quantized values (kernels/cpu/quant.h says what the steps and codes are): shared by
// the DeviceKernels interface and every implementation of it, so it sits beside the interface.
#pragma once
#include <cstddef>
#include <cstdint>

namespace spmd::kernels {

// Adding and subtracting 1.5·2^23 rounds a float of magnitude <= 2^22 to an integer, half to even: the sum
// lies where float32's spacing is 1, and the default rounding mode is round-to-nearest-even. The sum's low
// bits are then that integer in two's complement, so a code needs no conversion instruction.
constexpr float kRoundHalfEven = 0x1.8p23f;

// Bits at and above this, in a float with the sign cleared, are infinity or NaN.
constexpr uint32_t kNonFinite = 0x7f800000u;

struct QuantFormat {
  int bits = 8;           // 4 or 8
  size_t groupSize = 2048;  // even

  size_t groups(size_t n) const { return (n + groupSize - 1) / groupSize; }
  size_t codeBytes(size_t n) const { return n * size_t(bits) / 8; }
  // The stored size of n values: steps, then codes.
  size_t bytes(size_t n) const { return 4 * groups(n) + codeBytes(n); }
};

}  // namespace spmd::kernels
