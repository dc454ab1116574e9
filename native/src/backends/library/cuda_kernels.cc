#include "backends/library/cuda_kernels.h"

#include <algorithm>
#include <string>
#include <vector>

#include "backends/library/cuda_driver.h"
#include "base/error.h"
#include "kernels/cuda/kernel_args.h"

namespace spmd::library {
namespace {

using namespace kernels::cuda;
using kernels::QuantFormat;
using kernels::Strided;

// Blocks of kBlock threads resident per multiprocessor, about: what a grid-stride loop needs to keep memory busy.
constexpr unsigned kBlocksPerSm = 2048 / kBlock;
// The grid's second dimension (one record each) may not exceed this.
constexpr int kMaxGridY = 65535;

struct Kernel {
  CuFunction f = nullptr;
  const char* name = nullptr;
};

// The kernels of one element type of the 1-bit allreduce.
struct OneBitKernels {
  Kernel addSquares, finishScale, pack, accumulate, unpack;
};

class CudaKernels final : public kernels::DeviceKernels {
 public:
  CudaKernels(Memory& memory, Stream stream, std::span<const Fatbin> images) : m_(memory), d_(cudaDriver()), stream_(stream) {
    check(d_.init(0), "cuInit");
    CuContext context = nullptr;
    check(d_.ctxGetCurrent(&context), "cuCtxGetCurrent");
    if (!context) throw CommError(code::kDevice, "CUDA kernels: no CUDA context is current on the progress thread");
    CuDevice device = 0;
    int sms = 0;
    check(d_.ctxGetDevice(&device), "cuCtxGetDevice");
    check(d_.deviceGetAttribute(&sms, kAttributeMultiprocessorCount, device), "cuDeviceGetAttribute");
    sms_ = unsigned(std::max(1, sms));
    for (const Fatbin& image : images) {
      CuModule module = nullptr;
      const CuResult r = d_.moduleLoadData(&module, image.data);
      if (r == kCudaErrorNoBinaryForGpu || r == kCudaErrorUnsupportedPtxVersion) {
        throw CommError(code::kUnsupported, std::string("CUDA kernels: built for ") + kFatbinArchs +
                                                ", which this GPU or driver cannot run: " + d_.describe(r, "cuModuleLoadData"));
      }
      check(r, "cuModuleLoadData");
      modules_.push_back(module);
    }
    f32_ = oneBit("f32");
    f64_ = oneBit("f64");
    quantize_ = find("spmd_quantize");
    dequantizeSum_ = find("spmd_dequantize_sum");
    dequantizeSumQuantize_ = find("spmd_dequantize_sum_quantize");
    toF32_[0] = find("spmd_f16_to_f32");
    toF32_[1] = find("spmd_bf16_to_f32");
    toF32_[2] = find("spmd_f64_to_f32");
    fromF32_[0] = find("spmd_f32_to_f16");
    fromF32_[1] = find("spmd_f32_to_bf16");
    fromF32_[2] = find("spmd_f32_to_f64");
    divideF32_ = find("spmd_divide_f32");
    divideF64_ = find("spmd_divide_f64");
    partials_ = Buffer(memory, maxBlocks() * sizeof(double));
  }

  ~CudaKernels() override {
    for (CuModule module : modules_) d_.moduleUnload(module);
  }

  void addAndScale(float* x, const float* y, size_t n, size_t len, float* s, uint32_t* f) override { addAndScaleT(f32_, x, y, n, len, s, f); }
  void addAndScale(double* x, const double* y, size_t n, size_t len, double* s, uint32_t* f) override { addAndScaleT(f64_, x, y, n, len, s, f); }
  void packRecords(float* x, size_t chunk, int count, const float* s, uint8_t* r, size_t rb) override { packT(f32_, x, chunk, count, s, r, rb); }
  void packRecords(double* x, size_t chunk, int count, const double* s, uint8_t* r, size_t rb) override { packT(f64_, x, chunk, count, s, r, rb); }
  void accumulateRecords(Strided r, float d, float* acc, size_t n, float* s) override { accumulateT(f32_, r, d, acc, n, s); }
  void accumulateRecords(Strided r, double d, double* acc, size_t n, double* s) override { accumulateT(f64_, r, d, acc, n, s); }
  void unpackRecords(Strided r, size_t chunk, size_t n, float* out) override { unpackT(f32_, r, chunk, n, out); }
  void unpackRecords(Strided r, size_t chunk, size_t n, double* out) override { unpackT(f64_, r, chunk, n, out); }

  void quantize(QuantFormat f, const float* x, float* error, float beta, size_t n, uint8_t* out, uint32_t* nonFinite) override {
    if (n) launch(quantize_, groupBlocks(f, n, kQuantizeGroupsPerBlock), 1, 0, QuantizeArgs{layout(f, n), x, error, beta, out, nonFinite});
  }
  void dequantize(QuantFormat f, const uint8_t* in, size_t n, float* out) override { dequantizeSum(f, {in, 0, 1}, n, out); }
  void dequantizeSum(QuantFormat f, Strided in, size_t n, float* out) override {
    if (n) {
      launch(dequantizeSum_, groupBlocks(f, n, kSumGroupsPerBlock), 1, 0,
             DequantizeSumArgs{layout(f, n), in.base, in.stride, uint32_t(in.count), out});
    }
  }
  void dequantizeSumQuantize(QuantFormat f, Strided in, float* error, float beta, size_t n, uint8_t* out,
                             uint32_t* nonFinite) override {
    if (n) {
      launch(dequantizeSumQuantize_, groupBlocks(f, n, kSumGroupsPerBlock, sms_ * kSumQuantizeBlocksPerSm), 1, 0,
             DequantizeSumQuantizeArgs{layout(f, n), in.base, in.stride, uint32_t(in.count), error, beta, out, nonFinite});
    }
  }

  void toF32(DType dt, const void* src, float* dst, size_t count) override {
    if (dt == DType::F32) return m_.copy(dst, src, count * sizeof(float));
    if (count) launch(toF32_[wideIndex(dt)], blocks(count), 1, 0, ConvertArgs{src, dst, count});
  }
  void fromF32(DType dt, const float* src, void* dst, size_t count) override {
    if (dt == DType::F32) return m_.copy(dst, src, count * sizeof(float));
    if (count) launch(fromF32_[wideIndex(dt)], blocks(count), 1, 0, ConvertArgs{src, dst, count});
  }
  void divideInPlace(DType dt, void* data, size_t count, double divisor) override {
    if (count) launch(dt == DType::F64 ? divideF64_ : divideF32_, blocks(count), 1, 0, DivideArgs{data, count, divisor});
  }

 private:
  void check(CuResult r, const char* call) const {
    if (r != kCudaDriverSuccess) throw CommError(code::kDevice, d_.describe(r, call));
  }

  Kernel find(const char* name) const {
    for (CuModule module : modules_) {
      CuFunction f = nullptr;
      if (d_.moduleGetFunction(&f, module, name) == kCudaDriverSuccess) return {f, name};
    }
    throw CommError(code::kDevice, std::string("CUDA kernels: no kernel ") + name + " in the embedded fatbins");
  }

  OneBitKernels oneBit(const std::string& type) const {
    auto named = [&](const char* stem) { return find(("spmd_" + std::string(stem) + "_" + type).c_str()); };
    return {named("add_squares"), named("finish_scale"), named("pack_records"), named("accumulate_records"),
            named("unpack_records")};
  }

  template <class Args>
  void launch(const Kernel& k, unsigned gx, unsigned gy, unsigned sharedBytes, Args args) {
    void* params[] = {&args};
    const CuResult r = d_.launchKernel(k.f, gx, gy, 1, kBlock, 1, 1, sharedBytes, stream_, params, nullptr);
    if (r != kCudaDriverSuccess) throw CommError(code::kDevice, d_.describe(r, k.name));
  }

  unsigned maxBlocks() const { return sms_ * kBlocksPerSm; }
  // A grid-stride loop over `items`: as many blocks as keep the GPU busy, fewer for less work.
  unsigned blocks(uint64_t items, unsigned limit = 0) const {
    const uint64_t wanted = (items + kBlock - 1) / kBlock;
    return unsigned(std::clamp<uint64_t>(wanted, 1, limit ? limit : maxBlocks()));
  }
  // The first grid dimension when the second runs over `count` records.
  unsigned perRecord(uint64_t items, int count) const {
    if (count > kMaxGridY) throw CommError(code::kUnsupported, "CUDA kernels: at most " + std::to_string(kMaxGridY) + " ranks");
    return blocks(items, std::max(1u, maxBlocks() / unsigned(count)));
  }
  // Blocks for the groups of n values, `perBlock` groups a block at once, at most `limit` (0: maxBlocks()).
  unsigned groupBlocks(QuantFormat f, size_t n, unsigned perBlock, unsigned limit = 0) const {
    return blocks((f.groups(n) + perBlock - 1) / perBlock * kBlock, limit);
  }
  static QuantLayout layout(QuantFormat f, size_t n) { return {uint32_t(f.bits), f.groupSize, n}; }
  static int wideIndex(DType dt) { return dt == DType::F16 ? 0 : dt == DType::BF16 ? 1 : 2; }

  template <class T>
  void scale(const OneBitKernels& k, unsigned partials, size_t len, T* s, uint32_t* nonFinite) {
    launch(k.finishScale, 1, 1, 0, FinishScaleArgs<T>{partials_.as<double>(), partials, len, s, nonFinite});
  }

  template <class T>
  void addAndScaleT(const OneBitKernels& k, T* x, const T* y, size_t n, size_t len, T* s, uint32_t* nonFinite) {
    const unsigned g = blocks(len);
    launch(k.addSquares, g, 1, 0, AddSquaresArgs<T>{x, y, n, len, partials_.as<double>()});
    scale(k, g, len, s, nonFinite);
  }

  template <class T>
  void packT(const OneBitKernels& k, T* x, size_t chunk, int count, const T* s, uint8_t* records, size_t recordBytes) {
    if (count == 0) return;
    // A block's kBlock/32 warps pack 32 elements each: one block per kBlock elements, as for one per thread.
    launch(k.pack, perRecord(chunk, count), unsigned(count), 0,
           PackRecordsArgs<T>{x, chunk, s, records, recordBytes});
  }

  template <class T>
  void accumulateT(const OneBitKernels& k, Strided records, T divisor, T* acc, size_t n, T* s) {
    const unsigned g = blocks(n);
    launch(k.accumulate, g, 1, unsigned(records.count) * sizeof(T),
           AccumulateRecordsArgs<T>{records.base, records.stride, uint32_t(records.count), divisor, acc, n, partials_.as<double>()});
    scale(k, g, n, s, nullptr);
  }

  template <class T>
  void unpackT(const OneBitKernels& k, Strided records, size_t chunk, size_t n, T* out) {
    if (records.count == 0 || n == 0) return;
    launch(k.unpack, perRecord(chunk, records.count), unsigned(records.count), 0,
           UnpackRecordsArgs<T>{records.base, records.stride, chunk, n, out});
  }

  Memory& m_;
  const CudaDriver& d_;
  Stream stream_;
  std::vector<CuModule> modules_;
  unsigned sms_ = 1;
  OneBitKernels f32_, f64_;
  Kernel quantize_, dequantizeSum_, dequantizeSumQuantize_;
  Kernel toF32_[3], fromF32_[3];  // float16, bfloat16, float64
  Kernel divideF32_, divideF64_;
  Buffer partials_;  // one sum of squares per block of the last reduction
};

}  // namespace

std::span<const Fatbin> builtFatbins() { return {kFatbins, kFatbinCount}; }

std::unique_ptr<kernels::DeviceKernels> makeCudaKernels(Memory& memory, Stream stream, std::span<const Fatbin> images) {
  if (images.empty()) {
    throw CommError(code::kUnsupported,
                    "CUDA kernels: none in this build (built without nvcc); mean, float16/bfloat16 reductions and the "
                    "compressed and quantized stages need them on device cuda: rebuild with nvcc on the PATH");
  }
  return std::make_unique<CudaKernels>(memory, stream, images);
}

}  // namespace spmd::library
