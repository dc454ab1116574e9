#include <cstdlib>
#include <cstring>
#include <new>

#include "base/host_bytes.h"
#include "kernels/memory.h"
#include "kernels/cpu/cpu_kernels.h"

namespace spmd {

namespace {

class HostMemory final : public Memory {
 public:
  bool isHost() const override { return true; }
  void* alloc(size_t bytes) override { return allocHost(bytes); }
  void free(void* p) override { std::free(p); }
  void upload(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes); }
  void copy(void* dst, const void* src, size_t bytes) override {
    if (bytes && dst != src) std::memcpy(dst, src, bytes);
  }
  void zero(void* dst, size_t bytes) override {
    if (bytes) std::memset(dst, 0, bytes);
  }
  void synchronize() override {}
  kernels::DeviceKernels& kernels() override { return kernels::cpuKernels(); }
};

}  // namespace

Memory& hostMemory() {
  static HostMemory m;
  return m;
}

}  // namespace spmd
