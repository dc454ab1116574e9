#include "backends/library/cuda_driver.h"

#include "backends/library/dynlib.h"

namespace spmd::library {
namespace {

constexpr const char* kWhat = "CUDA kernels";
constexpr const char* kSoname = "libcuda.so.1";

CudaDriver open(const std::string& path) {
  void* lib = openLibrary(path, kWhat);
  CudaDriver d{};
  auto need = [&](const char* name, auto& fn) { resolve(lib, name, fn, true, path, kWhat); };
  need("cuInit", d.init);
  need("cuCtxGetCurrent", d.ctxGetCurrent);
  need("cuCtxGetDevice", d.ctxGetDevice);
  need("cuDeviceGetAttribute", d.deviceGetAttribute);
  need("cuModuleLoadData", d.moduleLoadData);
  need("cuModuleUnload", d.moduleUnload);
  need("cuModuleGetFunction", d.moduleGetFunction);
  need("cuLaunchKernel", d.launchKernel);
  need("cuGetErrorName", d.getErrorName);
  need("cuGetErrorString", d.getErrorString);
  return d;
}

}  // namespace

std::string CudaDriver::describe(CuResult r, const char* call) const {
  const char* name = nullptr;
  const char* text = nullptr;
  getErrorName(r, &name);
  getErrorString(r, &text);
  return std::string("CUDA ") + call + " failed: " + (name ? name : "unknown error") + ": " + (text ? text : "") + " (" +
         std::to_string(r) + ")";
}

const CudaDriver& cudaDriver() { return loadOnce(kSoname, &open); }

}  // namespace spmd::library
