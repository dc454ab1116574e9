// The arguments of the CUDA kernels (kernels/cuda/*.cu), one struct per kernel passed by value, compiled by
// nvcc for the kernels and by the host compiler for the launcher (backends/library/cuda_kernels.cc): plain
// pointers and fixed-width integers, so both lay them out alike. Kernel names are the extern "C" names
// listed beside each struct.
#pragma once
#include <cstddef>
#include <cstdint>

namespace spmd::kernels::cuda {

// Threads per block of every kernel; the reductions are written for it.
constexpr unsigned kBlock = 256;

// spmd_add_squares_{f32,f64}: x[i] += y[i] for i < n (y may be null); partials[block] = the block's share of
// the sum over i < len of x[i]^2.
template <class T>
struct AddSquaresArgs {
  T* x;
  const T* y;
  uint64_t n, len;
  double* partials;
};

// spmd_finish_scale_{f32,f64}, one block: *scale = T(sqrt(sum of partials[0..count) / len)); *nonFinite = 1
// when that is not finite (unless null).
template <class T>
struct FinishScaleArgs {
  const double* partials;
  uint32_t count;
  uint64_t len;
  T* scale;
  uint32_t* nonFinite;
};

// spmd_pack_records_{f32,f64}, grid.y = the record: record k <- signs of x[k·chunk ..), then *scale;
// x -= scale·sign(x).
template <class T>
struct PackRecordsArgs {
  T* x;
  uint64_t chunk;
  const T* scale;
  uint8_t* records;
  uint64_t recordBytes;
};

// spmd_accumulate_records_{f32,f64}, dynamic shared memory count·sizeof(T): acc[i] += (s_k / divisor)·sign_k(i)
// in record order; partials[block] as spmd_add_squares gives them for acc.
template <class T>
struct AccumulateRecordsArgs {
  const uint8_t* records;
  uint64_t stride;
  uint32_t count;
  T divisor;
  T* acc;
  uint64_t n;
  double* partials;
};

// spmd_unpack_records_{f32,f64}, grid.y = the record: out[k·chunk + i] = s_k·sign_k(i) where < n.
template <class T>
struct UnpackRecordsArgs {
  const uint8_t* records;
  uint64_t stride, chunk, n;
  T* out;
};

// Groups of quantized values a block of threads works on at once: spmd_quantize gives a group a block,
// spmd_dequantize_sum and spmd_dequantize_sum_quantize a warp (kernels/cuda/quant.cu says why).
constexpr unsigned kQuantizeGroupsPerBlock = 1;
constexpr unsigned kSumGroupsPerBlock = kBlock / 32;
// Blocks of spmd_dequantize_sum_quantize resident on a multiprocessor (its registers allow no more): its grid
// is no larger than they, so that no block starts its share of the groups after the others have finished.
constexpr unsigned kSumQuantizeBlocksPerSm = 2;

// A block of n values quantized in groups (kernels/cpu/quant.h).
struct QuantLayout {
  uint32_t bits;
  uint64_t groupSize, n;
};

// spmd_quantize: quant.h's quantize; *nonFinite = 1 when a value quantized is not finite.
struct QuantizeArgs {
  QuantLayout f;
  const float* x;
  float* error;  // null: no error feedback
  float beta;
  uint8_t* out;
  uint32_t* nonFinite;
};

// spmd_dequantize_sum: out = the sum of the count sources' values, in order.
struct DequantizeSumArgs {
  QuantLayout f;
  const uint8_t* sources;
  uint64_t stride;
  uint32_t count;
  float* out;
};

// spmd_dequantize_sum_quantize: the sum as spmd_dequantize_sum, quantized as
// spmd_quantize.
struct DequantizeSumQuantizeArgs {
  QuantLayout f;
  const uint8_t* sources;
  uint64_t stride;
  uint32_t count;
  float* error;
  float beta;
  uint8_t* out;
  uint32_t* nonFinite;
};

// spmd_{f16,bf16,f64}_to_f32, spmd_f32_to_{f16,bf16,f64}: element-wise conversions (kernels/cpu/convert.h).
struct ConvertArgs {
  const void* src;
  void* dst;
  uint64_t n;
};

// spmd_divide_{f32,f64}: data[i] /= divisor (float32: by float(divisor)).
struct DivideArgs {
  void* data;
  uint64_t n;
  double divisor;
};

}  // namespace spmd::kernels::cuda
