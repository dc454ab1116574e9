#include "core/dtype.h"

namespace spmd {

std::string_view dtypeName(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::F64: return "float64";
    case DType::I32: return "int32";
    case DType::I64: return "int64";
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
  }
  return "?";
}

bool parseDType(std::string_view n, DType& out) {
  for (DType t : {DType::F32, DType::F64, DType::I32, DType::I64, DType::F16, DType::BF16}) {
    if (dtypeName(t) == n) { out = t; return true; }
  }
  return false;
}

float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise into a float32 exponent
      int e = -1;
      do { man <<= 1; ++e; } while ((man & 0x400u) == 0);
      bits = sign | uint32_t(127 - 15 - e) << 23 | (man & 0x3ffu) << 13;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | man << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return sign | 0x7e00u;            // NaN
  if (absx >= 0x477ff000u) return sign | 0x7c00u;           // overflow rounds to Inf
  if (absx < 0x38800000u) {                                 // result is subnormal or zero
    if (absx < 0x33000000u) return sign;                    // below half the smallest subnormal
    uint32_t man = (absx & 0x7fffffu) | 0x800000u;
    int shift = 126 - int(absx >> 23) + 14;                 // 14..24
    uint32_t half = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return sign | uint16_t(half);
  }
  uint32_t h = ((absx >> 23) - 127 + 15) << 10 | (absx >> 13 & 0x3ffu);
  uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;   // carry may roll into the exponent: correct
  return sign | uint16_t(h);
}

}  // namespace spmd
