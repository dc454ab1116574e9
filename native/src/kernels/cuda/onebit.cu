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

// Values of T in one 16-byte access, and the lanes whose values make one packed byte.
template <class T>
constexpr int kLaneValues = 16 / sizeof(T);
template <class T>
constexpr int kLanesPerByte = 8 / kLaneValues<T>;
// 16-byte accesses each lane issues before its stores: the warp's tile is 32 × kPacks of them.
constexpr int kPacks = 4;
template <class T>
constexpr uint64_t kPackTile = 32 * kPacks * kLaneValues<T>;

// Every lane's kLaneValues<T> sign bits (its first value highest) joined into packed bytes: lane l holds
// the byte of lanes l .. l + kLanesPerByte - 1 where l is a multiple of kLanesPerByte.
template <class T>
__device__ inline uint8_t joinSigns(uint32_t bits) {
  for (int w = kLaneValues<T>; w < 8; w *= 2) bits = bits << w | __shfl_down_sync(0xffffffffu, bits, w / kLaneValues<T>);
  return uint8_t(bits);
}

// x[from, chunk) of one record a warp ballot at a time: 32 values per step, any alignment.
template <class T>
__device__ void packBallots(T* x, uint64_t from, uint64_t chunk, T s, uint8_t* record) {
  const unsigned lane = threadIdx.x & 31;
  const uint64_t warps = uint64_t(gridDim.x) * (blockDim.x / 32);
  // Whole warps step through the 32-element tiles together: a ballot needs every lane.
  for (uint64_t t = from / 32 + blockIdx.x * uint64_t(blockDim.x / 32) + threadIdx.x / 32; t * 32 < chunk; t += warps) {
    const uint64_t i = t * 32 + lane;
    const bool valid = i < chunk;
    const T v = valid ? x[i] : T(0);
    const bool positive = v >= T(0);
    const uint32_t signs = __ballot_sync(0xffffffffu, valid && positive);
    if (valid) x[i] = v - (positive ? s : -s);
    if (lane < 4 && t * 4 + lane < chunk / 8) record[t * 4 + lane] = reversed(signs >> (8 * lane));
  }
}

// x[0, tiles · kPackTile) of one record from 16-byte loads and stores: each lane takes kPacks accesses
// 512 bytes apart, so every load and store of the warp is contiguous. A ballot per 32 values cost an
// instruction and a 4-byte access for each, and reached 65% of a copy's bandwidth on an H200.
template <class T>
__device__ void packTiles(T* x, uint64_t tiles, T s, uint8_t* record) {
  using P = Pack<T, kLaneValues<T>>;
  const unsigned lane = threadIdx.x & 31;
  const uint64_t warps = uint64_t(gridDim.x) * (blockDim.x / 32);
  for (uint64_t t = blockIdx.x * uint64_t(blockDim.x / 32) + threadIdx.x / 32; t < tiles; t += warps) {
    P* at = reinterpret_cast<P*>(x + t * kPackTile<T>) + lane;
    P v[kPacks];
#pragma unroll
    for (int u = 0; u < kPacks; ++u) v[u] = at[32 * u];
#pragma unroll
    for (int u = 0; u < kPacks; ++u) {
      uint32_t bits = 0;
#pragma unroll
      for (int j = 0; j < kLaneValues<T>; ++j) {
        const bool positive = v[u].v[j] >= T(0);
        bits = bits << 1 | positive;
        v[u].v[j] = v[u].v[j] - (positive ? s : -s);
      }
      at[32 * u] = v[u];
      const uint8_t byte = joinSigns<T>(bits);
      const uint64_t first = t * kPackTile<T> + (32 * u + lane) * kLaneValues<T>;  // this lane's first value
      if (lane % kLanesPerByte<T> == 0) record[first / 8] = byte;
    }
  }
}

template <class T>
__device__ void packRecords(const PackRecordsArgs<T>& a) {
  const uint64_t k = blockIdx.y;
  T* x = a.x + k * a.chunk;
  uint8_t* record = a.records + k * a.recordBytes;
  const T s = *a.scale;
  const uint64_t tiles = aligned(x, 16) ? a.chunk / kPackTile<T> : 0;
  packTiles(x, tiles, s, record);
  packBallots(x, tiles * kPackTile<T>, a.chunk, s, record);
  if (blockIdx.x == 0 && threadIdx.x == 0) storeUnaligned(record + a.chunk / 8, s);
}

// v + w·(+1 or -1) for each value of a pack, from the sign bits of its first value's byte.
template <class T, int E>
__device__ inline void addSigns(Pack<T, E>& v, uint8_t byte, unsigned shift, T w) {
#pragma unroll
  for (int j = 0; j < E; ++j) v.v[j] = v.v[j] + w * ((byte >> (shift - j)) & 1 ? T(1) : T(-1));
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
  // Whole packs of kLaneValues<T> values, each inside one record byte; then the rest a value at a time.
  constexpr int E = kLaneValues<T>;
  using P = Pack<T, E>;
  const uint64_t packs = aligned(a.acc, 16) ? a.n / E : 0, threads = uint64_t(gridDim.x) * blockDim.x;
  double squares = 0;
  for (uint64_t base = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; base < packs; base += threads * kPacks) {
    P v[kPacks];
#pragma unroll
    for (int u = 0; u < kPacks; ++u) {
      if (base + u * threads < packs) v[u] = reinterpret_cast<const P*>(a.acc)[base + u * threads];
    }
    // Each record's kPacks bytes are loaded before any is used: one wait per record, not per pack.
    for (uint32_t k = 0; k < a.count; ++k) {
      const uint8_t* record = a.records + k * a.stride;
      uint8_t bytes[kPacks];
#pragma unroll
      for (int u = 0; u < kPacks; ++u) bytes[u] = base + u * threads < packs ? record[(base + u * threads) * E / 8] : 0;
#pragma unroll
      for (int u = 0; u < kPacks; ++u) addSigns(v[u], bytes[u], 7 - unsigned((base + u * threads) * E % 8), weights[k]);
    }
#pragma unroll
    for (int u = 0; u < kPacks; ++u) {
      if (base + u * threads >= packs) continue;
      reinterpret_cast<P*>(a.acc)[base + u * threads] = v[u];
      for (int j = 0; j < E; ++j) squares += double(v[u].v[j]) * double(v[u].v[j]);
    }
  }
  for (uint64_t i = packs * E + blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < a.n; i += threads) {
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
  T* out = a.out + start;
  // 16 bytes of output a thread (a nibble or two bits of the record), contiguous across the warp; a record
  // byte a thread made two 16-byte stores 32 bytes apart, which fell from 52% to 33% of a copy on an H200.
  constexpr int E = kLaneValues<T>;
  using P = Pack<T, E>;
  const uint64_t packs = aligned(out, 16) ? len / E : 0;
  streamGrid(
      packs, [&](uint64_t p) { return record[p * E / 8]; },
      [&](uint64_t p, uint8_t byte) {
        P v;
#pragma unroll
        for (int j = 0; j < E; ++j) v.v[j] = s * ((byte >> (7 - unsigned(p * E % 8) - j)) & 1 ? T(1) : T(-1));
        reinterpret_cast<P*>(out)[p] = v;
      });
  streamGrid(
      len - packs * E, [&](uint64_t i) { return bool(record[(packs * E + i) / 8] & (0x80u >> ((packs * E + i) & 7))); },
      [&](uint64_t i, bool positive) { out[packs * E + i] = s * (positive ? T(1) : T(-1)); });
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
