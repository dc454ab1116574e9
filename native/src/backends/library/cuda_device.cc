// CUDA device memory through libcudart opened at run time, so the addon builds and loads without CUDA.
// The few runtime calls it needs are declared here from the CUDA runtime API documentation. Copies are
// issued on the communicator's stream, so they keep their place among its collectives and kernels.
#include <dlfcn.h>

#include <optional>
#include <string>

#include "backends/library/cuda_kernels.h"
#include "backends/library/device.h"
#include "base/error.h"

namespace spmd::library {
namespace {

constexpr int kCudaSuccess = 0;
constexpr int kCudaErrorMemoryAllocation = 2;
constexpr int kCudaErrorNotReady = 600;
constexpr int kHostToDevice = 1, kDeviceToHost = 2, kDeviceToDevice = 3;

struct CudaRt {
  int (*setDevice)(int);
  int (*malloc)(void**, size_t);
  int (*free)(void*);
  int (*memcpyAsync)(void*, const void*, size_t, int, Stream);
  int (*memsetAsync)(void*, int, size_t, Stream);
  int (*streamCreate)(Stream*);
  int (*streamQuery)(Stream);
  int (*streamDestroy)(Stream);
  int (*memGetInfo)(size_t*, size_t*);
  const char* (*errorString)(int);
};

// The sonames of the CUDA majors NCCL 2 wheels ship with, newest first.
const CudaRt& cudart() {
  static const CudaRt rt = [] {
    void* lib = nullptr;
    std::string tried;
    for (const char* name : {"libcudart.so.13", "libcudart.so.12", "libcudart.so"}) {
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
      tried += std::string(tried.empty() ? "" : "; ") + dlerror();
    }
    if (!lib) throw CommError(code::kUnsupported, "nccl: cannot load the CUDA runtime (" + tried + ")");
    CudaRt r{};
    auto sym = [lib](const char* name) {
      void* p = dlsym(lib, name);
      if (!p) throw CommError(code::kUnsupported, std::string("nccl: the CUDA runtime lacks ") + name);
      return p;
    };
    r.setDevice = reinterpret_cast<int (*)(int)>(sym("cudaSetDevice"));
    r.malloc = reinterpret_cast<int (*)(void**, size_t)>(sym("cudaMalloc"));
    r.free = reinterpret_cast<int (*)(void*)>(sym("cudaFree"));
    r.memcpyAsync = reinterpret_cast<int (*)(void*, const void*, size_t, int, Stream)>(sym("cudaMemcpyAsync"));
    r.memsetAsync = reinterpret_cast<int (*)(void*, int, size_t, Stream)>(sym("cudaMemsetAsync"));
    r.streamCreate = reinterpret_cast<int (*)(Stream*)>(sym("cudaStreamCreate"));
    r.streamQuery = reinterpret_cast<int (*)(Stream)>(sym("cudaStreamQuery"));
    r.streamDestroy = reinterpret_cast<int (*)(Stream)>(sym("cudaStreamDestroy"));
    r.memGetInfo = reinterpret_cast<int (*)(size_t*, size_t*)>(sym("cudaMemGetInfo"));
    r.errorString = reinterpret_cast<const char* (*)(int)>(sym("cudaGetErrorString"));
    return r;
  }();
  return rt;
}

void check(int err, const char* call) {
  if (err == kCudaSuccess) return;
  throw CommError(code::kDevice, std::string("CUDA ") + call + " failed: " + cudart().errorString(err) + " (" +
                                   std::to_string(err) + ")");
}

class CudaDevice : public Device {
 public:
  explicit CudaDevice(int device) : index_(device) {
    select();
    check(cudart().streamCreate(&stream_), "cudaStreamCreate");
    // Loaded now, outside any op's time. Where they cannot be (a build without nvcc, no driver API), only
    // the ops that need them fail, saying why.
    try {
      kernels_ = makeCudaKernels(*this, stream_);
    } catch (const CommError& e) {
      kernelsMissing_ = e;
    }
  }
  ~CudaDevice() override {
    kernels_.reset();
    cudart().streamDestroy(stream_);
  }
  void* alloc(size_t bytes) override {
    void* p = nullptr;
    const int err = cudart().malloc(&p, bytes ? bytes : 1);
    // ERR_SPMD_NOMEM, as for host memory: the executor adds the tensor or stage it was for.
    if (err == kCudaErrorMemoryAllocation) throwNoMemory("CUDA device memory (cudaMalloc)", bytes);
    check(err, "cudaMalloc");
    return p;
  }
  void free(void* p) override {
    if (p) cudart().free(p);
  }
  void upload(void* dst, const void* src, size_t bytes) override {
    copy(dst, src, bytes, kHostToDevice);
    synchronize();
  }
  void download(void* dst, const void* src, size_t bytes) override {
    copy(dst, src, bytes, kDeviceToHost);
    synchronize();
  }
  void copy(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes, kDeviceToDevice); }
  void zero(void* dst, size_t bytes) override {
    if (bytes) check(cudart().memsetAsync(dst, 0, bytes, stream_), "cudaMemsetAsync");
  }
  kernels::DeviceKernels& kernels() override {
    if (!kernels_) throw *kernelsMissing_;
    return *kernels_;
  }
  Stream stream() const override { return stream_; }
  void select() override { check(cudart().setDevice(index_), "cudaSetDevice"); }
  bool idle() override {
    const int err = cudart().streamQuery(stream_);
    if (err == kCudaErrorNotReady) return false;
    check(err, "cudaStreamQuery");
    return true;
  }

 private:
  void copy(void* dst, const void* src, size_t bytes, int kind) {
    if (bytes && dst != src) check(cudart().memcpyAsync(dst, src, bytes, kind, stream_), "cudaMemcpyAsync");
  }

  int index_;
  Stream stream_ = nullptr;
  std::unique_ptr<kernels::DeviceKernels> kernels_;
  std::optional<CommError> kernelsMissing_;
};

}  // namespace

std::unique_ptr<Device> makeCudaDevice(int index) { return std::make_unique<CudaDevice>(index); }

DeviceMemoryInfo cudaMemoryInfo(int index) {
  check(cudart().setDevice(index), "cudaSetDevice");
  DeviceMemoryInfo m{0, 0, "cudaMemGetInfo"};
  check(cudart().memGetInfo(&m.free, &m.total), "cudaMemGetInfo");
  return m;
}

}  // namespace spmd::library
