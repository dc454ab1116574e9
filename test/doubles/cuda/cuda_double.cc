// A test double for the CUDA driver: the calls backends/library/cuda_kernels.cc makes to load the embedded
// fatbins and launch the project's kernels (kernels/cuda/kernel_args.h says what each one does). A module is
// any image with a fatbin's magic; a kernel asked for by name runs on the launching thread, once its stream
// is idle, as the CPU kernels do that work, so results match the host backends' byte for byte. A grid
// reduction puts its whole sum in partials[0] and zeros in the other blocks' places. Its SONAME is
// libcuda.so.1, and the NCCL double links it, as it does the runtime's double (cudart_double.cc).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "common/export.h"
#include "common/stream.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/kernel_args.h"

using namespace spmd::kernels::cuda;
using spmd::DType;
using spmd::kernels::QuantFormat;
using spmd::kernels::Strided;

namespace {

// CUresult values.
constexpr int kSuccess = 0, kInvalidValue = 1, kInvalidImage = 200, kNotFound = 500;
constexpr uint32_t kFatbinMagic = 0xBA55ED50;
constexpr int kAttributeMultiprocessorCount = 16;
// Few multiprocessors, so that the launches' grids still have several blocks to reduce over.
constexpr int kMultiprocessors = 4;

struct Grid {
  unsigned x, y;
};

struct Function {
  std::string_view name;
  void (*run)(void* args, Grid grid);
};

spmd::kernels::DeviceKernels& cpu() { return spmd::kernels::cpuKernels(); }

template <class Args>
Args& as(void* args) {
  return *static_cast<Args*>(args);
}

void onePartial(double* partials, unsigned blocks, double sum) {
  partials[0] = sum;
  for (unsigned b = 1; b < blocks; ++b) partials[b] = 0;
}

QuantFormat format(const QuantLayout& l) { return {int(l.bits), l.groupSize}; }

template <class T>
void addSquares(void* args, Grid g) {
  auto& a = as<AddSquaresArgs<T>>(args);
  onePartial(a.partials, g.x, spmd::kernels::addAndSumSquares(a.x, a.y, a.n, a.len));
}

template <class T>
void finishScale(void* args, Grid) {
  auto& a = as<FinishScaleArgs<T>>(args);
  double sum = 0;
  for (uint32_t b = 0; b < a.count; ++b) sum += a.partials[b];
  *a.scale = T(std::sqrt(sum / double(a.len)));
  if (a.nonFinite && !std::isfinite(*a.scale)) *a.nonFinite = 1;
}

template <class T>
void packRecords(void* args, Grid g) {
  auto& a = as<PackRecordsArgs<T>>(args);
  cpu().packRecords(a.x, a.chunk, int(g.y), a.scale, a.records, a.recordBytes);
}

template <class T>
void accumulateRecords(void* args, Grid g) {
  auto& a = as<AccumulateRecordsArgs<T>>(args);
  onePartial(a.partials, g.x, spmd::kernels::accumulateRecordsSquares(Strided{a.records, a.stride, int(a.count)}, a.divisor, a.acc, a.n, 0.0));
}

template <class T>
void unpackRecords(void* args, Grid g) {
  auto& a = as<UnpackRecordsArgs<T>>(args);
  cpu().unpackRecords(Strided{a.records, a.stride, int(g.y)}, a.chunk, a.n, a.out);
}

void quantize(void* args, Grid) {
  auto& a = as<QuantizeArgs>(args);
  cpu().quantize(format(a.f), a.x, a.error, a.beta, a.f.n, a.out, a.nonFinite);
}

void dequantizeSum(void* args, Grid) {
  auto& a = as<DequantizeSumArgs>(args);
  cpu().dequantizeSum(format(a.f), Strided{a.sources, a.stride, int(a.count)}, a.f.n, a.out);
}

void dequantizeSumQuantize(void* args, Grid) {
  auto& a = as<DequantizeSumQuantizeArgs>(args);
  cpu().dequantizeSumQuantize(format(a.f), Strided{a.sources, a.stride, int(a.count)}, a.error, a.beta, a.f.n, a.out, a.nonFinite);
}

template <DType dt>
void toF32(void* args, Grid) {
  auto& a = as<ConvertArgs>(args);
  cpu().toF32(dt, a.src, static_cast<float*>(a.dst), a.n);
}

template <DType dt>
void fromF32(void* args, Grid) {
  auto& a = as<ConvertArgs>(args);
  cpu().fromF32(dt, static_cast<const float*>(a.src), a.dst, a.n);
}

template <DType dt>
void divide(void* args, Grid) {
  auto& a = as<DivideArgs>(args);
  cpu().divideInPlace(dt, a.data, a.n, a.divisor);
}

const Function kFunctions[] = {
    {"spmd_add_squares_f32", addSquares<float>},
    {"spmd_add_squares_f64", addSquares<double>},
    {"spmd_finish_scale_f32", finishScale<float>},
    {"spmd_finish_scale_f64", finishScale<double>},
    {"spmd_pack_records_f32", packRecords<float>},
    {"spmd_pack_records_f64", packRecords<double>},
    {"spmd_accumulate_records_f32", accumulateRecords<float>},
    {"spmd_accumulate_records_f64", accumulateRecords<double>},
    {"spmd_unpack_records_f32", unpackRecords<float>},
    {"spmd_unpack_records_f64", unpackRecords<double>},
    {"spmd_quantize", quantize},
    {"spmd_dequantize_sum", dequantizeSum},
    {"spmd_dequantize_sum_quantize", dequantizeSumQuantize},
    {"spmd_f16_to_f32", toF32<DType::F16>},
    {"spmd_bf16_to_f32", toF32<DType::BF16>},
    {"spmd_f64_to_f32", toF32<DType::F64>},
    {"spmd_f32_to_f16", fromF32<DType::F16>},
    {"spmd_f32_to_bf16", fromF32<DType::BF16>},
    {"spmd_f32_to_f64", fromF32<DType::F64>},
    {"spmd_divide_f32", divide<DType::F32>},
    {"spmd_divide_f64", divide<DType::F64>},
};

// The one context and module: they hold nothing in a double.
struct CUctx_st {
} context;
struct CUmod_st {
} module;

}  // namespace

SPMD_DOUBLE_EXPORT int cuInit(unsigned) { return kSuccess; }

SPMD_DOUBLE_EXPORT int cuCtxGetCurrent(CUctx_st** out) {
  *out = &context;
  return kSuccess;
}

SPMD_DOUBLE_EXPORT int cuCtxGetDevice(int* device) {
  *device = 0;
  return kSuccess;
}

SPMD_DOUBLE_EXPORT int cuDeviceGetAttribute(int* value, int attribute, int /*device*/) {
  if (attribute != kAttributeMultiprocessorCount) return kInvalidValue;
  *value = kMultiprocessors;
  return kSuccess;
}

SPMD_DOUBLE_EXPORT int cuModuleLoadData(CUmod_st** out, const void* image) {
  uint32_t magic = 0;
  std::memcpy(&magic, image, sizeof magic);
  if (magic != kFatbinMagic) return kInvalidImage;
  *out = &module;
  return kSuccess;
}

SPMD_DOUBLE_EXPORT int cuModuleUnload(CUmod_st*) { return kSuccess; }

SPMD_DOUBLE_EXPORT int cuModuleGetFunction(const Function** out, CUmod_st*, const char* name) {
  for (const Function& f : kFunctions) {
    if (f.name == name) {
      *out = &f;
      return kSuccess;
    }
  }
  return kNotFound;
}

SPMD_DOUBLE_EXPORT int cuLaunchKernel(const Function* f, unsigned gx, unsigned gy, unsigned /*gz*/, unsigned /*bx*/, unsigned /*by*/,
                                      unsigned /*bz*/, unsigned /*sharedBytes*/, void* stream, void** params, void** extra) {
  if (!params || extra || gx == 0 || gy == 0) return kInvalidValue;
  if (stream) static_cast<spmd::doubles::Stream*>(stream)->drain();
  f->run(params[0], {gx, gy});
  return kSuccess;
}

SPMD_DOUBLE_EXPORT int cuGetErrorName(int error, const char** name) {
  switch (error) {
    case kSuccess: *name = "CUDA_SUCCESS"; return kSuccess;
    case kInvalidValue: *name = "CUDA_ERROR_INVALID_VALUE"; return kSuccess;
    case kInvalidImage: *name = "CUDA_ERROR_INVALID_IMAGE"; return kSuccess;
    case kNotFound: *name = "CUDA_ERROR_NOT_FOUND"; return kSuccess;
    default: *name = nullptr; return kInvalidValue;
  }
}

SPMD_DOUBLE_EXPORT int cuGetErrorString(int error, const char** text) {
  const char* name = nullptr;
  const int r = cuGetErrorName(error, &name);
  *text = name ? "(the CUDA driver double)" : nullptr;
  return r;
}
