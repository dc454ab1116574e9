// Element-wise conversions and the mean's division (kernels/device_kernels.h; the CPU's are
// kernels/cpu/convert.h). Halves convert through base/half_bits.h, the code the CPU runs, so both give
// the same bits, NaNs included.
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "base/half_bits.h"

namespace spmd::kernels::cuda {
namespace {

template <class Src, class Dst, class Convert>
__device__ void convert(const ConvertArgs& a, Convert f) {
  const auto* src = static_cast<const Src*>(a.src);
  auto* dst = static_cast<Dst*>(a.dst);
  streamGrid(a.n, [&](uint64_t i) { return src[i]; }, [&](uint64_t i, Src v) { dst[i] = f(v); });
}

template <class T>
__device__ void divide(const DivideArgs& a, T d) {
  auto* p = static_cast<T*>(a.data);
  streamGrid(a.n, [&](uint64_t i) { return p[i]; }, [&](uint64_t i, T v) { p[i] = v / d; });
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

extern "C" __global__ void __launch_bounds__(kBlock) spmd_divide_f32(DivideArgs a) { divide(a, float(a.divisor)); }
extern "C" __global__ void __launch_bounds__(kBlock) spmd_divide_f64(DivideArgs a) { divide(a, a.divisor); }
