// The test double's memory: host memory, and the double's streams, which complete its ops on a thread of
// its own so that waiting, async errors and aborts are exercised as on a GPU.
#include <cstdlib>
#include <cstring>

#include "backends/nccl/device.h"
#include "core/error.h"

namespace spmd::nccl {

class HostDevice : public Device {
 public:
  explicit HostDevice(const Api& api) : api_(api) {
    if (api_.doubleStreamCreate(&stream_) != 0) throw CommError(code::kNccl, "nccl double: cannot create a stream");
  }
  ~HostDevice() override { api_.doubleStreamDestroy(stream_); }
  void* alloc(size_t bytes) override {
    void* p = std::malloc(bytes ? bytes : 1);
    if (!p) throw CommError(code::kSystem, "nccl double: out of host memory");
    return p;
  }
  void free(void* p) override { std::free(p); }
  void toDevice(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void toHost(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  cudaStream_t stream() const override { return stream_; }
  bool idle() override { return api_.doubleStreamQuery(stream_) == 0; }

 private:
  const Api& api_;
  cudaStream_t stream_ = nullptr;
};

std::unique_ptr<Device> makeCudaDevice(int localRank);  // cuda_device.cc

std::unique_ptr<Device> makeDevice(const Api& api, int localRank) {
  if (api.hostMemory()) return std::make_unique<HostDevice>(api);
  return makeCudaDevice(localRank);
}

void* DeviceBuffer::get(size_t bytes) {
  if (bytes > bytes_ || !p_) {
    d_.free(p_);
    p_ = nullptr;
    p_ = d_.alloc(bytes);
    bytes_ = bytes;
  }
  return p_;
}

}  // namespace spmd::nccl
