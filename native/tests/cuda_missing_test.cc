// Where the CUDA kernels cannot run, the error says why, as ERR_SPMD_UNSUPPORTED: a build without nvcc (no
// fatbins), and, on a machine without the GPU driver, libcuda.so.1 missing. Needs no GPU.
#include <dlfcn.h>

#include <cstdio>
#include <string>

#include "backends/library/cuda_kernels.h"
#include "base/error.h"

using namespace spmd;

namespace {

int failures = 0;

void expectUnsupported(std::span<const kernels::cuda::Fatbin> images, const std::string& says, const char* what) {
  try {
    library::makeCudaKernels(hostMemory(), nullptr, images);
    std::printf("FAIL %s: no error\n", what);
    ++failures;
  } catch (const CommError& e) {
    const bool ok = std::string(e.code()) == code::kUnsupported && std::string(e.what()).find(says) != std::string::npos;
    if (!ok) {
      std::printf("FAIL %s: %s: %s\n", what, e.code(), e.what());
      ++failures;
    }
  }
}

}  // namespace

int main() {
  expectUnsupported({}, "built without nvcc", "no fatbins");
  if (void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    dlclose(driver);
    std::puts("cuda_missing_test: libcuda.so.1 loads here; its absence is not tested");
  } else {
    const unsigned char image[8] = {};
    const kernels::cuda::Fatbin one{"fake", image, sizeof image};
    expectUnsupported({&one, 1}, "cannot load libcuda.so.1", "no driver");
  }
  std::printf("cuda_missing_test: %s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
