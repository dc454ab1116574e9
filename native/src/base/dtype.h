// Element types and reduction operators shared by kernels, algorithms and backends.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "base/half_bits.h"

namespace spmd {

enum class DType : uint8_t { F32, F64, I32, I64, F16, BF16 };
inline constexpr DType kDTypes[] = {DType::F32, DType::F64, DType::I32, DType::I64, DType::F16, DType::BF16};
enum class RedOp : uint8_t { Sum, Max, Min };

inline size_t elementSize(DType t) {
  switch (t) {
    case DType::F32: case DType::I32: return 4;
    case DType::F64: case DType::I64: return 8;
    case DType::F16: case DType::BF16: return 2;
  }
  return 0;
}

inline bool isHalf(DType t) { return t == DType::F16 || t == DType::BF16; }
inline bool isFloat(DType t) { return t != DType::I32 && t != DType::I64; }

// Names as they appear in job files and reports; parse returns false on an unknown name.
std::string_view dtypeName(DType t);
bool parseDType(std::string_view name, DType& out);
std::vector<std::string_view> dtypeNames();  // of kDTypes, in order

// IEEE binary16 and bfloat16 conversions, round-to-nearest-even, NaN preserved (base/half_bits.h).
inline float halfToFloat(uint16_t h) {
  const uint32_t bits = kernels::halfToFloatBits(h);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline uint16_t floatToHalf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return kernels::floatBitsToHalf(bits);
}
inline float bf16ToFloat(uint16_t b) {
  const uint32_t bits = kernels::bf16ToFloatBits(b);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline uint16_t floatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return kernels::floatBitsToBf16(bits);
}

}  // namespace spmd
