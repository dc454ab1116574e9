// The test doubles' memory: host memory, the CPU kernels, and the doubles' streams, which complete their
// ops on a thread of their own so that waiting, async errors and aborts are exercised as on a device. Every
// collective is waited for before the next call, so copies and kernels here never race the double's thread.
#include <cstdlib>

#include "backends/library/device.h"
#include "backends/library/dynlib.h"
#include "base/error.h"
#include "kernels/memory.h"

namespace spmd::library {
namespace {

class HostDevice : public Device {
 public:
  explicit HostDevice(const DoubleStreams& s) : s_(s) {
    if (s_.create(&stream_) != 0) throw CommError(code::kSystem, "test double: cannot create a stream");
  }
  ~HostDevice() override { s_.destroy(stream_); }
  void* alloc(size_t bytes) override {
    void* p = std::malloc(bytes ? bytes : 1);
    if (!p) throw CommError(code::kSystem, "test double: out of host memory");
    return p;
  }
  void free(void* p) override { std::free(p); }
  // The double's device memory is host memory: moving and clearing it is the host's.
  void upload(void* dst, const void* src, size_t bytes) override { hostMemory().upload(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { hostMemory().download(dst, src, bytes); }
  void copy(void* dst, const void* src, size_t bytes) override { hostMemory().copy(dst, src, bytes); }
  void zero(void* dst, size_t bytes) override { hostMemory().zero(dst, bytes); }
  kernels::DeviceKernels& kernels() override { return hostMemory().kernels(); }
  Stream stream() const override { return stream_; }
  bool idle() override { return s_.query(stream_) == 0; }

 private:
  DoubleStreams s_;
  Stream stream_ = nullptr;
};

}  // namespace

DoubleStreams DoubleStreams::find(void* lib, const std::string& path, const char* what) {
  DoubleStreams s;
  resolve(lib, "spmdDoubleStreamCreate", s.create, false, path, what);
  resolve(lib, "spmdDoubleStreamQuery", s.query, false, path, what);
  resolve(lib, "spmdDoubleStreamDestroy", s.destroy, false, path, what);
  if (s.present() && (!s.create || !s.destroy)) {
    throw CommError(code::kUnsupported, std::string(what) + ": " + path + " exports only part of the test double's stream functions");
  }
  return s;
}

std::unique_ptr<Device> makeHostDevice(const DoubleStreams& streams) { return std::make_unique<HostDevice>(streams); }

}  // namespace spmd::library
