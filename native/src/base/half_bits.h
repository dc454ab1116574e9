// float16 and bfloat16 conversions on bit patterns, round-to-nearest-even, written once for the host
// (base/dtype.h) and the CUDA kernels (kernels/cuda), so a tensor converted on a GPU holds the same bits
// as one converted on the CPU, NaNs included.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define SPMD_HOST_DEVICE __host__ __device__
#else
#define SPMD_HOST_DEVICE
#endif

namespace spmd::kernels {

SPMD_HOST_DEVICE inline uint32_t halfToFloatBits(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0) {
    if (man == 0) return sign;
    int e = -1;  // subnormal: normalise into a float32 exponent
    do {
      man <<= 1;
      ++e;
    } while ((man & 0x400u) == 0);
    return sign | uint32_t(127 - 15 - e) << 23 | (man & 0x3ffu) << 13;
  }
  if (exp == 0x1f) return sign | 0x7f800000u | man << 13;
  return sign | (exp + 127 - 15) << 23 | man << 13;
}

SPMD_HOST_DEVICE inline uint16_t floatBitsToHalf(uint32_t x) {
  const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  const uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (absx >= 0x477ff000u) return sign | 0x7c00u;  // overflow rounds to Inf
  if (absx < 0x38800000u) {                        // result is subnormal or zero
    if (absx < 0x33000000u) return sign;           // below half the smallest subnormal
    // The float is man · 2^(e - 150) and a subnormal half counts units of 2^-24: man >> (126 - e).
    const uint32_t man = (absx & 0x7fffffu) | 0x800000u;
    const int shift = 126 - int(absx >> 23);  // 14..24
    uint32_t half = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1);
    const uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return sign | uint16_t(half);
  }
  uint32_t h = ((absx >> 23) - 127 + 15) << 10 | (absx >> 13 & 0x3ffu);
  const uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // carry may roll into the exponent: correct
  return sign | uint16_t(h);
}

SPMD_HOST_DEVICE inline uint32_t bf16ToFloatBits(uint16_t b) { return uint32_t(b) << 16; }

SPMD_HOST_DEVICE inline uint16_t floatBitsToBf16(uint32_t bits) {
  if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x40);  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

}  // namespace spmd::kernels
