// The kernels that the estimating ops (estimating/compressed_allreduce.h, estimating/quantized_allreduce.h) and the typed
// reductions (algorithms/typed_ops.h) run where a lane's tensors live (kernels/memory.h): the CPU kernels on host
// memory (kernels/cpu/cpu_kernels.h), CUDA kernels on a GPU's (kernels/cuda/cuda_kernels.h). The algorithms are
// written once over this interface.
//
// Every pointer points into that memory. A call is ordered after the work issued before it there (a GPU
// stream's order) and may return before it completes. What decides later work stays in that memory (a
// scale, a non-finite flag): a caller that needs it on the host downloads it.
//
// The results are the CPU kernels' (kernels/cpu/onebit.h, quant.h, convert.h) bit for bit: packed signs,
// codes, steps, dequantized sums, conversions. One exception: a device adds a sum of squares in another
// order, so a scale may differ in its last bit.
#pragma once
#include <cstddef>
#include <cstdint>

#include "base/dtype.h"
#include "kernels/quant_format.h"

namespace spmd::kernels {

// `count` byte arrays at base, base + stride, base + 2·stride, ...
struct Strided {
  const uint8_t* base = nullptr;
  size_t stride = 0;
  int count = 0;
  const uint8_t* at(int i) const { return base + size_t(i) * stride; }
};

// A record of the 1-bit allreduce carries one chunk of c elements: c/8 bytes of packed signs (onebit.h's
// layout) and then the chunk's scale, sizeof(T) bytes at whatever alignment the record has.
class DeviceKernels {
 public:
  virtual ~DeviceKernels() = default;

  // 1-bit kernels, T = float or double.
  // x[i] += y[i] for i < n (nothing added when y is null); then *scale = sqrt(sum over i < len of x[i]^2 / len),
  // the sum in double and the result rounded to T; *nonFinite = 1 when that is not finite (unless null).
  virtual void addAndScale(float* x, const float* y, size_t n, size_t len, float* scale, uint32_t* nonFinite) = 0;
  virtual void addAndScale(double* x, const double* y, size_t n, size_t len, double* scale, uint32_t* nonFinite) = 0;
  // Record k (at records + k·recordBytes, k < count) <- the signs of x[k·chunk, (k+1)·chunk) and *scale; then
  // x[i] -= scale·sign(x[i]). chunk is a multiple of 8.
  virtual void packRecords(float* x, size_t chunk, int count, const float* scale, uint8_t* records, size_t recordBytes) = 0;
  virtual void packRecords(double* x, size_t chunk, int count, const double* scale, uint8_t* records, size_t recordBytes) = 0;
  // acc[i] += (s_k / divisor)·sign_k(i) over the records of n-element chunks, added in record order (s_k: the
  // scale record k carries, divided in T); then *scale as addAndScale gives it for acc.
  virtual void accumulateRecords(Strided records, float divisor, float* acc, size_t n, float* scale) = 0;
  virtual void accumulateRecords(Strided records, double divisor, double* acc, size_t n, double* scale) = 0;
  // out[k·chunk + i] = s_k·sign_k(i) wherever k·chunk + i < n.
  virtual void unpackRecords(Strided records, size_t chunk, size_t n, float* out) = 0;
  virtual void unpackRecords(Strided records, size_t chunk, size_t n, double* out) = 0;

  // Quantization (quant.h). *nonFinite = 1 when a value quantized is not finite.
  virtual void quantize(QuantFormat f, const float* x, float* error, float beta, size_t n, uint8_t* out,
                        uint32_t* nonFinite) = 0;
  virtual void dequantize(QuantFormat f, const uint8_t* in, size_t n, float* out) = 0;
  virtual void dequantizeSum(QuantFormat f, Strided in, size_t n, float* out) = 0;
  virtual void dequantizeSumQuantize(QuantFormat f, Strided in, float* error, float beta, size_t n, uint8_t* out,
                                     uint32_t* nonFinite) = 0;

  // Conversions (convert.h).
  virtual void toF32(DType dt, const void* src, float* dst, size_t count) = 0;
  virtual void fromF32(DType dt, const float* src, void* dst, size_t count) = 0;
  virtual void divideInPlace(DType dt, void* data, size_t count, double divisor) = 0;
};

}  // namespace spmd::kernels
