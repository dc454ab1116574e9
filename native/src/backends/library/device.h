// Where a vendor library's buffers live. The executor keeps tensors in host memory, so each op stages
// them through device buffers: cudaMalloc'd memory and a CUDA stream (libcudart), aclrtMalloc'd memory
// and an ACL stream (libascendcl), both opened at run time; or, with the host-memory test doubles,
// host memory and the double's own streams. The shared collectives see only this.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "backends/library/library.h"

namespace spmd::library {

class Device {
 public:
  virtual ~Device() = default;
  virtual void* alloc(size_t bytes) = 0;
  virtual void free(void* p) = 0;
  // Synchronous copies; called only while the stream is idle.
  virtual void toDevice(void* dst, const void* src, size_t bytes) = 0;
  virtual void toHost(void* dst, const void* src, size_t bytes) = 0;
  virtual Stream stream() const = 0;
  // After work was issued on stream(): a device that can only poll events records one here.
  virtual void issued() {}
  // True once everything issued on stream() completed; never blocks.
  virtual bool idle() = 0;
};

// The test doubles' streams (int spmdDoubleStreamCreate(void**), Query(void*) -> 0 idle / 1 busy,
// Destroy(void*)), which a double exports beside the vendor's ABI; their presence marks the double.
struct DoubleStreams {
  int (*create)(Stream*) = nullptr;
  int (*query)(Stream) = nullptr;
  int (*destroy)(Stream) = nullptr;
  // Resolves them from an opened library; all null for a real vendor library.
  static DoubleStreams find(void* lib, const std::string& path, const char* what);
  bool present() const { return query != nullptr; }
};

std::unique_ptr<Device> makeHostDevice(const DoubleStreams& streams);
// CUDA device `index`; throws CommError kUnsupported when libcudart cannot be loaded.
std::unique_ptr<Device> makeCudaDevice(int index);
// Ascend device `index`; throws CommError kUnsupported when libascendcl cannot be loaded.
std::unique_ptr<Device> makeAclDevice(int index);

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

}  // namespace spmd::library
