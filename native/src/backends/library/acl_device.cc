// Ascend device memory through libascendcl (the ACL runtime) opened at run time, so the addon builds and
// loads without CANN. The calls are declared here from the ACL runtime API documentation. ACL streams
// are polled through an event recorded after each op (aclrtQueryEventStatus). Copies use ACL's synchronous
// calls once the stream is idle. There are no NPU kernels in this project: ops that need kernels on the
// device (mean, float16/bfloat16 reductions, the compressed and quantized stages) are refused.
#include <cstdint>
#include <string>

#include "backends/library/device.h"
#include "backends/library/dynlib.h"
#include "base/error.h"

namespace spmd::library {
namespace {

constexpr int kAclSuccess = 0;
constexpr int kAclMemoryAllocation = 207001;  // ACL_ERROR_RT_MEMORY_ALLOCATION
constexpr int kMallocHugeFirst = 0;  // aclrtMemMallocPolicy ACL_MEM_MALLOC_HUGE_FIRST
constexpr int kHostToDevice = 1, kDeviceToHost = 2, kDeviceToDevice = 3;
constexpr int kEventComplete = 1;  // aclrtEventRecordedStatus ACL_EVENT_RECORDED_STATUS_COMPLETE
constexpr int kHbmMemory = 1;      // aclrtMemAttr ACL_HBM_MEM: the NPU's own memory
using Event = void*;

struct AclRt {
  int (*setDevice)(int);
  int (*malloc)(void**, size_t, int);
  int (*free)(void*);
  int (*memcpy)(void*, size_t, const void*, size_t, int);
  int (*memset)(void*, size_t, int32_t, size_t);
  int (*createStream)(Stream*);
  int (*destroyStream)(Stream);
  int (*createEvent)(Event*);
  int (*destroyEvent)(Event);
  int (*recordEvent)(Event, Stream);
  int (*queryEventStatus)(Event, int*);
  int (*getMemInfo)(int, size_t*, size_t*);
};

const AclRt& aclrt() {
  static const AclRt rt = [] {
    const std::string path = "libascendcl.so";
    void* lib = openLibrary(path, "hccl (ACL runtime)");
    AclRt r{};
    const char* what = "hccl (ACL runtime)";
    resolve(lib, "aclrtSetDevice", r.setDevice, true, path, what);
    resolve(lib, "aclrtMalloc", r.malloc, true, path, what);
    resolve(lib, "aclrtFree", r.free, true, path, what);
    resolve(lib, "aclrtMemcpy", r.memcpy, true, path, what);
    resolve(lib, "aclrtMemset", r.memset, true, path, what);
    resolve(lib, "aclrtCreateStream", r.createStream, true, path, what);
    resolve(lib, "aclrtDestroyStream", r.destroyStream, true, path, what);
    resolve(lib, "aclrtCreateEvent", r.createEvent, true, path, what);
    resolve(lib, "aclrtDestroyEvent", r.destroyEvent, true, path, what);
    resolve(lib, "aclrtRecordEvent", r.recordEvent, true, path, what);
    resolve(lib, "aclrtQueryEventStatus", r.queryEventStatus, true, path, what);
    resolve(lib, "aclrtGetMemInfo", r.getMemInfo, true, path, what);
    return r;
  }();
  return rt;
}

void check(int err, const char* call) {
  if (err != kAclSuccess) throw CommError(code::kDevice, std::string("ACL ") + call + " failed with error " + std::to_string(err));
}

class AclDevice : public Device {
 public:
  explicit AclDevice(int device) {
    check(aclrt().setDevice(device), "aclrtSetDevice");
    check(aclrt().createStream(&stream_), "aclrtCreateStream");
    check(aclrt().createEvent(&event_), "aclrtCreateEvent");
  }
  ~AclDevice() override {
    aclrt().destroyEvent(event_);
    aclrt().destroyStream(stream_);
  }
  void* alloc(size_t bytes) override {
    void* p = nullptr;
    const int err = aclrt().malloc(&p, bytes ? bytes : 1, kMallocHugeFirst);
    if (err == kAclMemoryAllocation) throwNoMemory("NPU device memory (aclrtMalloc)", bytes);
    check(err, "aclrtMalloc");
    return p;
  }
  void free(void* p) override {
    if (p) aclrt().free(p);
  }
  void upload(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes, kHostToDevice); }
  void download(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes, kDeviceToHost); }
  void copy(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes, kDeviceToDevice); }
  void zero(void* dst, size_t bytes) override {
    if (!bytes) return;
    synchronize();
    check(aclrt().memset(dst, bytes, 0, bytes), "aclrtMemset");
  }
  kernels::DeviceKernels& kernels() override {
    throw CommError(code::kUnsupported,
                    "hccl: this build has no NPU kernels (mean, float16/bfloat16 reductions and the compressed and quantized "
                    "stages need them on device npu)");
  }
  Stream stream() const override { return stream_; }
  void issued() override { check(aclrt().recordEvent(event_, stream_), "aclrtRecordEvent"); }
  bool idle() override {
    int status = 0;
    check(aclrt().queryEventStatus(event_, &status), "aclrtQueryEventStatus");
    return status == kEventComplete;
  }

 private:
  void copy(void* dst, const void* src, size_t bytes, int kind) {
    if (!bytes || dst == src) return;
    synchronize();
    check(aclrt().memcpy(dst, bytes, src, bytes, kind), "aclrtMemcpy");
  }

  Stream stream_ = nullptr;
  Event event_ = nullptr;
};

}  // namespace

std::unique_ptr<Device> makeAclDevice(int index) { return std::make_unique<AclDevice>(index); }

DeviceMemoryInfo aclMemoryInfo(int index) {
  check(aclrt().setDevice(index), "aclrtSetDevice");
  DeviceMemoryInfo m{0, 0, "aclrtGetMemInfo"};
  check(aclrt().getMemInfo(kHbmMemory, &m.free, &m.total), "aclrtGetMemInfo");
  return m;
}

}  // namespace spmd::library
