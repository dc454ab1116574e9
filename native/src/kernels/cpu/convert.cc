#include "kernels/cpu/convert.h"

#include <cstdint>
#include <cstring>

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

void toF32(DType dt, const void* src, float* __restrict dst, size_t count) {
  if (isHalf(dt)) return widenToF32(dt, src, dst, count);
  if (dt == DType::F32) {
    if (count) std::memcpy(dst, src, count * sizeof(float));
    return;
  }
  const auto* s = static_cast<const double*>(src);
  for (size_t i = 0; i < count; ++i) dst[i] = float(s[i]);
}

void fromF32(DType dt, const float* __restrict src, void* dst, size_t count) {
  if (isHalf(dt)) return narrowFromF32(dt, src, dst, count);
  if (dt == DType::F32) {
    if (count) std::memcpy(dst, src, count * sizeof(float));
    return;
  }
  auto* d = static_cast<double*>(dst);
  for (size_t i = 0; i < count; ++i) d[i] = src[i];
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
