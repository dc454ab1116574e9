// Where NCCL's buffers live. The executor keeps tensors in host memory, so each op stages them through
// device buffers: on a GPU cudaMalloc'd memory and a CUDA stream (libcudart, opened at run time); with the
// host-memory test double, host memory and the double's own streams. The collectives see only this.
#pragma once
#include <cstddef>
#include <memory>

#include "backends/nccl/nccl_api.h"

namespace spmd::nccl {

class Device {
 public:
  virtual ~Device() = default;
  virtual void* alloc(size_t bytes) = 0;
  virtual void free(void* p) = 0;
  // Synchronous copies; called only while the stream is idle.
  virtual void toDevice(void* dst, const void* src, size_t bytes) = 0;
  virtual void toHost(void* dst, const void* src, size_t bytes) = 0;
  virtual cudaStream_t stream() const = 0;
  // True once everything issued on stream() completed; never blocks.
  virtual bool idle() = 0;
};

// The double's host memory when `api` is the double; else CUDA device `localRank` (throws CommError
// kUnsupported when libcudart cannot be loaded or has no such device).
std::unique_ptr<Device> makeDevice(const Api& api, int localRank);

// A device buffer that grows to the largest size asked of it and is freed with its owner.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(Device& d) : d_(d) {}
  ~DeviceBuffer() { d_.free(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get(size_t bytes);

 private:
  Device& d_;
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace spmd::nccl
