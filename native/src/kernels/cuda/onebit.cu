// The 1-bit allreduce's kernels (kernels/device_kernels.h; the CPU's are kernels/cpu/onebit.h): sums of
// squares and their scale, sign packing into records with the compression error kept, and the weighted sums
// and unpacking of received records. Signs are gathered one warp ballot per 32 elements.
#include <cstdint>

#include "kernels/cuda/common.cuh"

namespace spmd::kernels::cuda {
namespace {

template <class T>
__device__ void addSquares(const AddSquaresArgs<T>& a) {
  double squares = 0;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < a.len; i += uint64_t(gridDim.x) * blockDim.x) {
    T v = a.x[i];
    if (i < a.n && a.y) {
      v += a.y[i];
      a.x[i] = v;
    }
    squares += double(v) * double(v);
  }
  squares = blockSum(squares);
  if (threadIdx.x == 0) a.partials[blockIdx.x] = squares;
}

template <class T>
__device__ void finishScale(const FinishScaleArgs<T>& a) {
  double squares = 0;
  for (uint32_t i = threadIdx.x; i < a.count; i += blockDim.x) squares += a.partials[i];
  squares = blockSum(squares);
  if (threadIdx.x != 0) return;
  const T scale = T(sqrt(squares / double(a.len)));
  *a.scale = scale;
  if (a.nonFinite && !isfinite(scale)) *a.nonFinite = 1;
}

// Bit j of b to bit 7-j: a ballot holds element j of a byte in bit j, packed signs in bit 7-j.
__device__ inline uint8_t reversed(uint32_t b) { return uint8_t(__brev(b) >> 24); }

template <class T>
__device__ void packRecords(const PackRecordsArgs<T>& a) {
  const uint64_t k = blockIdx.y;
  T* x = a.x + k * a.chunk;
  uint8_t* record = a.records + k * a.recordBytes;
  const T s = *a.scale;
  const unsigned lane = threadIdx.x & 31;
  const uint64_t warps = uint64_t(gridDim.x) * (blockDim.x / 32);
  // Whole warps step through the chunk's 32-element tiles together: a ballot needs every lane.
  for (uint64_t t = blockIdx.x * uint64_t(blockDim.x / 32) + threadIdx.x / 32; t * 32 < a.chunk; t += warps) {
    const uint64_t i = t * 32 + lane;
    const bool valid = i < a.chunk;
    const T v = valid ? x[i] : T(0);
    const bool positive = v >= T(0);
    const uint32_t signs = __ballot_sync(0xffffffffu, valid && positive);
    if (valid) x[i] = v - (positive ? s : -s);
    if (lane < 4 && t * 4 + lane < a.chunk / 8) record[t * 4 + lane] = reversed(signs >> (8 * lane));
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) storeUnaligned(record + a.chunk / 8, s);
}

template <class T>
__device__ void accumulateRecords(const AccumulateRecordsArgs<T>& a) {
  extern __shared__ __align__(16) unsigned char shared[];
  T* weights = reinterpret_cast<T*>(shared);
  const uint64_t chunkBytes = a.n / 8;
  for (uint32_t k = threadIdx.x; k < a.count; k += blockDim.x) {
    weights[k] = loadUnaligned<T>(a.records + k * a.stride + chunkBytes) / a.divisor;
  }
  __syncthreads();
  double squares = 0;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < a.n; i += uint64_t(gridDim.x) * blockDim.x) {
    const uint8_t bit = uint8_t(0x80u >> (i & 7));
    T v = a.acc[i];
    for (uint32_t k = 0; k < a.count; ++k) {
      const bool positive = a.records[k * a.stride + i / 8] & bit;
      v += weights[k] * (positive ? T(1) : T(-1));
    }
    a.acc[i] = v;
    squares += double(v) * double(v);
  }
  squares = blockSum(squares);
  if (threadIdx.x == 0) a.partials[blockIdx.x] = squares;
}

template <class T>
__device__ void unpackRecords(const UnpackRecordsArgs<T>& a) {
  const uint64_t k = blockIdx.y, start = k * a.chunk;
  if (start >= a.n) return;
  const uint64_t len = min(a.chunk, a.n - start);
  const uint8_t* record = a.records + k * a.stride;
  const T s = loadUnaligned<T>(record + a.chunk / 8);
  streamGrid(
      len, [&](uint64_t i) { return bool(record[i / 8] & (0x80u >> (i & 7))); },
      [&](uint64_t i, bool positive) { a.out[start + i] = s * (positive ? T(1) : T(-1)); });
}

}  // namespace
}  // namespace spmd::kernels::cuda

using namespace spmd::kernels::cuda;

#define SPMD_ONEBIT_KERNELS(T, suffix)                                                                                   \
  extern "C" __global__ void __launch_bounds__(kBlock) spmd_add_squares_##suffix(AddSquaresArgs<T> a) { addSquares(a); } \
  extern "C" __global__ void __launch_bounds__(kBlock) spmd_finish_scale_##suffix(FinishScaleArgs<T> a) { finishScale(a); } \
  extern "C" __global__ void __launch_bounds__(kBlock) spmd_pack_records_##suffix(PackRecordsArgs<T> a) { packRecords(a); } \
  extern "C" __global__ void __launch_bounds__(kBlock) spmd_accumulate_records_##suffix(AccumulateRecordsArgs<T> a) {    \
    accumulateRecords(a);                                                                                                \
  }                                                                                                                      \
  extern "C" __global__ void __launch_bounds__(kBlock) spmd_unpack_records_##suffix(UnpackRecordsArgs<T> a) { unpackRecords(a); }
SPMD_ONEBIT_KERNELS(float, f32)
SPMD_ONEBIT_KERNELS(double, f64)
