#include "kernels/cpu/convert.h"

#include <cstdint>

namespace spmd::kernels {

void widenToF32(DType dt, const void* src, float* __restrict dst, size_t count) {
  const auto* s = static_cast<const uint16_t*>(src);
  if (dt == DType::BF16) {
    for (size_t i = 0; i < count; ++i) dst[i] = bf16ToFloat(s[i]);
  } else {
    for (size_t i = 0; i < count; ++i) dst[i] = halfToFloat(s[i]);
  }
}

void narrowFromF32(DType dt, const float* __restrict src, void* dst, size_t count) {
  auto* d = static_cast<uint16_t*>(dst);
  if (dt == DType::BF16) {
    for (size_t i = 0; i < count; ++i) d[i] = floatToBf16(src[i]);
  } else {
    for (size_t i = 0; i < count; ++i) d[i] = floatToHalf(src[i]);
  }
}

void divideInPlace(DType dt, void* data, size_t count, double divisor) {
  if (dt == DType::F64) {
    auto* p = static_cast<double*>(data);
    for (size_t i = 0; i < count; ++i) p[i] /= divisor;
  } else {
    auto* p = static_cast<float*>(data);
    float d = float(divisor);
    for (size_t i = 0; i < count; ++i) p[i] /= d;
  }
}

}  // namespace spmd::kernels
