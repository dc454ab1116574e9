// A test double for the Ascend runtime (ACL): the calls backends/library/acl_device.cc makes, on host memory
// and the doubles' streams. Its SONAME is libascendcl.so, the name acl_device.cc opens, and the HCCL double
// links it, as the real libhccl.so links libascendcl.so. An event marks what its stream had been given when
// it was recorded. ACL's copies are synchronous, and acl_device.cc makes them once the stream is idle.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "common/device_bytes.h"
#include "common/export.h"
#include "common/stream.h"

using spmd::doubles::Stream;

namespace {

// aclError values.
constexpr int kSuccess = 0, kInvalidParam = 100000, kAllocationFailed = 207001;
// aclrtEventRecordedStatus.
constexpr int kNotReady = 0, kComplete = 1;

struct Event {
  const Stream* stream = nullptr;
  uint64_t issued = 0;
};

}  // namespace

SPMD_DOUBLE_EXPORT int aclrtSetDevice(int) { return kSuccess; }

SPMD_DOUBLE_EXPORT int aclrtMalloc(void** p, size_t bytes, int /*policy*/) {
  *p = spmd::doubles::deviceAlloc(bytes);
  return *p ? kSuccess : kAllocationFailed;
}

SPMD_DOUBLE_EXPORT int aclrtFree(void* p) {
  std::free(p);
  return kSuccess;
}

SPMD_DOUBLE_EXPORT int aclrtMemcpy(void* dst, size_t dstMax, const void* src, size_t bytes, int /*kind*/) {
  if (bytes > dstMax) return kInvalidParam;
  std::memcpy(dst, src, bytes);
  return kSuccess;
}

SPMD_DOUBLE_EXPORT int aclrtMemset(void* dst, size_t dstMax, int32_t value, size_t bytes) {
  if (bytes > dstMax) return kInvalidParam;
  std::memset(dst, value, bytes);
  return kSuccess;
}

SPMD_DOUBLE_EXPORT int aclrtCreateStream(void** stream) {
  *stream = new Stream;
  return kSuccess;
}

SPMD_DOUBLE_EXPORT int aclrtDestroyStream(void* stream) {
  delete static_cast<Stream*>(stream);
  return kSuccess;
}

SPMD_DOUBLE_EXPORT int aclrtCreateEvent(void** event) {
  *event = new Event;
  return kSuccess;
}

SPMD_DOUBLE_EXPORT int aclrtDestroyEvent(void* event) {
  delete static_cast<Event*>(event);
  return kSuccess;
}

SPMD_DOUBLE_EXPORT int aclrtRecordEvent(void* event, void* stream) {
  if (!stream) return kInvalidParam;
  auto* s = static_cast<const Stream*>(stream);
  *static_cast<Event*>(event) = {s, s->issued.load()};
  return kSuccess;
}

SPMD_DOUBLE_EXPORT int aclrtQueryEventStatus(void* event, int* status) {
  const Event& e = *static_cast<Event*>(event);
  *status = !e.stream || e.stream->done.load() >= e.issued ? kComplete : kNotReady;
  return kSuccess;
}

SPMD_DOUBLE_EXPORT int aclrtGetMemInfo(int /*attr*/, size_t* free, size_t* total) {
  *free = *total = spmd::doubles::deviceBytes();
  return kSuccess;
}
