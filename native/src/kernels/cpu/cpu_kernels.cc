#include "kernels/cpu/cpu_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/onebit.h"
#include "kernels/cpu/quant.h"

namespace spmd::kernels {
namespace {

// Scratch that grows to the largest size a thread asked for, so warm steps do not allocate.
template <class T>
T* scratch(size_t n) {
  thread_local std::vector<T> v;
  if (v.size() < n) v.resize(n);
  return v.data();
}

template <class T>
T loadScale(const uint8_t* record, size_t chunk) {
  T s;
  std::memcpy(&s, record + chunk / 8, sizeof s);
  return s;
}

template <class T>
void addAndScaleT(T* x, const T* y, size_t n, size_t len, T* scale, uint32_t* nonFinite) {
  rms(addAndSumSquares(x, y, n, len), len, scale, nonFinite);
}

template <class T>
void packRecordsT(T* x, size_t chunk, int count, const T* scale, uint8_t* records, size_t recordBytes) {
  for (int k = 0; k < count; ++k) {
    uint8_t* record = records + size_t(k) * recordBytes;
    packSignsKeepError(x + size_t(k) * chunk, chunk, *scale, record);
    std::memcpy(record + chunk / 8, scale, sizeof(T));
  }
}

template <class T>
void accumulateRecordsT(Strided records, T divisor, T* acc, size_t n, T* scale) {
  rms(accumulateRecordsSquares(records, divisor, acc, n, 0.0), n, scale, nullptr);
}

template <class T>
void unpackRecordsT(Strided records, size_t chunk, size_t n, T* out) {
  const auto unpack = n * sizeof(T) >= kStreamBytes ? unpackScaledStreaming<T> : unpackScaled<T>;
  for (int k = 0; k < records.count && size_t(k) * chunk < n; ++k) {
    const size_t start = size_t(k) * chunk;
    unpack(records.at(k), std::min(chunk, n - start), loadScale<T>(records.at(k), chunk), out + start);
  }
}

const uint8_t* const* sourcesOf(Strided in) {
  const auto** sources = scratch<const uint8_t*>(size_t(in.count));
  for (int k = 0; k < in.count; ++k) sources[k] = in.at(k);
  return sources;
}

class CpuKernels final : public DeviceKernels {
 public:
  void addAndScale(float* x, const float* y, size_t n, size_t len, float* s, uint32_t* f) override { addAndScaleT(x, y, n, len, s, f); }
  void addAndScale(double* x, const double* y, size_t n, size_t len, double* s, uint32_t* f) override { addAndScaleT(x, y, n, len, s, f); }
  void packRecords(float* x, size_t chunk, int count, const float* s, uint8_t* r, size_t rb) override { packRecordsT(x, chunk, count, s, r, rb); }
  void packRecords(double* x, size_t chunk, int count, const double* s, uint8_t* r, size_t rb) override { packRecordsT(x, chunk, count, s, r, rb); }
  void accumulateRecords(Strided r, float d, float* acc, size_t n, float* s) override { accumulateRecordsT(r, d, acc, n, s); }
  void accumulateRecords(Strided r, double d, double* acc, size_t n, double* s) override { accumulateRecordsT(r, d, acc, n, s); }
  void unpackRecords(Strided r, size_t chunk, size_t n, float* out) override { unpackRecordsT(r, chunk, n, out); }
  void unpackRecords(Strided r, size_t chunk, size_t n, double* out) override { unpackRecordsT(r, chunk, n, out); }

  void quantize(QuantFormat f, const float* x, float* error, float beta, size_t n, uint8_t* out, uint32_t* nonFinite) override {
    if (!kernels::quantize(f, x, error, beta, n, out)) *nonFinite = 1;
  }
  void dequantize(QuantFormat f, const uint8_t* in, size_t n, float* out) override { kernels::dequantize(f, in, n, out); }
  void dequantizeSum(QuantFormat f, Strided in, size_t n, float* out) override {
    kernels::dequantizeSum(f, sourcesOf(in), in.count, n, out);
  }
  void dequantizeSumQuantize(QuantFormat f, Strided in, float* error, float beta, size_t n, uint8_t* out,
                             uint32_t* nonFinite) override {
    float* sums = scratch<float>(std::min(n, f.groupSize));
    if (!kernels::dequantizeSumQuantize(f, sourcesOf(in), in.count, error, beta, n, sums, out)) *nonFinite = 1;
  }

  void toF32(DType dt, const void* src, float* dst, size_t count) override { kernels::toF32(dt, src, dst, count); }
  void fromF32(DType dt, const float* src, void* dst, size_t count) override { kernels::fromF32(dt, src, dst, count); }
  void divideInPlace(DType dt, void* data, size_t count, double divisor) override { kernels::divideInPlace(dt, data, count, divisor); }
};

}  // namespace

DeviceKernels& cpuKernels() {
  static CpuKernels k;
  return k;
}

template <class T>
double addAndSumSquares(T* x, const T* y, size_t n, size_t len) {
  const double head = y ? addAndSumSquares(x, y, n) : sumSquares(x, n);
  return head + sumSquares(x + n, len - n);
}

template <class T>
double accumulateRecordsSquares(Strided records, T divisor, T* acc, size_t n, double squares) {
  const auto** sources = scratch<const uint8_t*>(size_t(records.count));
  T* weights = scratch<T>(size_t(records.count));
  for (int k = 0; k < records.count; ++k) {
    sources[k] = records.at(k);
    weights[k] = loadScale<T>(sources[k], n) / divisor;
  }
  return accumulateSigns(sources, weights, records.count, acc, n, squares);
}

template double addAndSumSquares<float>(float*, const float*, size_t, size_t);
template double addAndSumSquares<double>(double*, const double*, size_t, size_t);
template double accumulateRecordsSquares<float>(Strided, float, float*, size_t, double);
template double accumulateRecordsSquares<double>(Strided, double, double*, size_t, double);

template <class T>
void rms(double squares, size_t len, T* scale, uint32_t* nonFinite) {
  *scale = T(std::sqrt(squares / double(len)));
  if (nonFinite && !std::isfinite(*scale)) *nonFinite = 1;
}
template void rms<float>(double, size_t, float*, uint32_t*);
template void rms<double>(double, size_t, double*, uint32_t*);

}  // namespace spmd::kernels
