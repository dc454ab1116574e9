// The part of the CUDA driver API (libcuda.so.1, which comes with the GPU driver) that loads and launches
// the project's kernels, declared here from the driver API documentation and opened at run time, so the
// addon builds and loads without it. The CUDA runtime (cuda_device.cc) owns the context; the driver calls
// use the one current on the calling thread.
#pragma once
#include <string>

namespace spmd::library {

using CuResult = int;
using CuModule = struct CUmod_st*;
using CuFunction = struct CUfunc_st*;
using CuContext = struct CUctx_st*;
using CuDevice = int;

constexpr CuResult kCudaDriverSuccess = 0;
constexpr CuResult kCudaErrorNoBinaryForGpu = 209;
constexpr CuResult kCudaErrorUnsupportedPtxVersion = 222;
constexpr int kAttributeMultiprocessorCount = 16;  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT

struct CudaDriver {
  CuResult (*init)(unsigned flags);
  CuResult (*ctxGetCurrent)(CuContext*);
  CuResult (*ctxGetDevice)(CuDevice*);
  CuResult (*deviceGetAttribute)(int*, int attribute, CuDevice);
  CuResult (*moduleLoadData)(CuModule*, const void* image);
  CuResult (*moduleUnload)(CuModule);
  CuResult (*moduleGetFunction)(CuFunction*, CuModule, const char* name);
  CuResult (*launchKernel)(CuFunction, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                           unsigned sharedBytes, void* stream, void** params, void** extra);
  CuResult (*getErrorName)(CuResult, const char**);
  CuResult (*getErrorString)(CuResult, const char**);

  // "<call> failed: <name>: <text> (<number>)".
  std::string describe(CuResult r, const char* call) const;
};

// libcuda.so.1, opened once; throws CommError kUnsupported naming dlerror() or the missing symbol.
const CudaDriver& cudaDriver();

}  // namespace spmd::library
