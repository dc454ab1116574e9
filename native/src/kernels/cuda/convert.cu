// Element-wise conversions and the mean's division (kernels/device_kernels.h; the CPU's are
// kernels/cpu/convert.h). Halves convert through base/half_bits.h, the code the CPU runs, so both give
// the same bits, NaNs included.
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "base/half_bits.h"

namespace spmd::kernels::cuda {
namespace {

// Values per thread and access: 16 bytes of the wider type, so that every access of a warp is contiguous
// (16 bytes of the narrower one made the wider 32 bytes a thread, two accesses 32 bytes apart: toF32 bfloat16
// fell from 72% to 44% of a copy on an H200).
template <class Src, class Dst>
constexpr int kPerAccess = 16 / (sizeof(Src) > sizeof(Dst) ? sizeof(Src) : sizeof(Dst));

template <class Src, class Dst, class Convert>
__device__ void convert(const ConvertArgs& a, Convert f) {
  mapElements<kPerAccess<Src, Dst>>(static_cast<const Src*>(a.src), static_cast<Dst*>(a.dst), a.n, f);
}

template <class T>
__device__ void divide(const DivideArgs& a, T d) {
  auto* p = static_cast<T*>(a.data);
  mapElements<kPerAccess<T, T>>(p, p, a.n, [d](T v) { return v / d; });
}

// float32 by its reciprocal where divideBy gives division's bits (zeros included), else by IEEE division:
// a division a value kept the SM busier than the memory (59% of a copy on an H200).
__device__ void divideF32(const DivideArgs& a) {
  const float d = float(a.divisor), r = 1.0f / d;
  if (!(d >= 0x1p-20f && d <= 0x1p20f)) return divide(a, d);
  auto* p = static_cast<float*>(a.data);
  mapElements<kPerAccess<float, float>>(p, p, a.n, [d, r](float v) {
    const uint32_t m = __float_as_uint(v) & 0x7fffffffu;
    const bool exact = m == 0 || (m >= 0x21800000u && m < 0x71800000u);  // 0, or [2^-60, 2^100)
    return exact ? divideBy(v, d, r) : v / d;
  });
}

}  // namespace
}  // namespace spmd::kernels::cuda

using namespace spmd::kernels;
using namespace spmd::kernels::cuda;

extern "C" __global__ void __launch_bounds__(kBlock) spmd_f16_to_f32(ConvertArgs a) {
  convert<uint16_t, float>(a, [](uint16_t h) { return __uint_as_float(halfToFloatBits(h)); });
}
extern "C" __global__ void __launch_bounds__(kBlock) spmd_bf16_to_f32(ConvertArgs a) {
  convert<uint16_t, float>(a, [](uint16_t b) { return __uint_as_float(bf16ToFloatBits(b)); });
}
extern "C" __global__ void __launch_bounds__(kBlock) spmd_f64_to_f32(ConvertArgs a) {
  convert<double, float>(a, [](double d) { return float(d); });
}
extern "C" __global__ void __launch_bounds__(kBlock) spmd_f32_to_f16(ConvertArgs a) {
  convert<float, uint16_t>(a, [](float f) { return floatBitsToHalf(__float_as_uint(f)); });
}
extern "C" __global__ void __launch_bounds__(kBlock) spmd_f32_to_bf16(ConvertArgs a) {
  convert<float, uint16_t>(a, [](float f) { return floatBitsToBf16(__float_as_uint(f)); });
}
extern "C" __global__ void __launch_bounds__(kBlock) spmd_f32_to_f64(ConvertArgs a) {
  convert<float, double>(a, [](float f) { return double(f); });
}

extern "C" __global__ void __launch_bounds__(kBlock) spmd_divide_f32(DivideArgs a) { divideF32(a); }
extern "C" __global__ void __launch_bounds__(kBlock) spmd_divide_f64(DivideArgs a) { divide(a, a.divisor); }
