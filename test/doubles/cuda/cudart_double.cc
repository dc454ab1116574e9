// A test double for the CUDA runtime: the calls backends/library/cuda_device.cc makes, on host memory and the
// doubles' streams. Its SONAME is libcudart.so.13, the first one cuda_device.cc opens, and the NCCL double
// links it, so the dynamic loader hands it to cuda_device.cc in every process that loaded that double (as an
// NCCL wheel brings its CUDA runtime), and to no other.
#include <cstdlib>
#include <cstring>

#include "common/device_bytes.h"
#include "common/export.h"
#include "common/stream.h"

using spmd::doubles::Stream;

namespace {

// cudaError_t values.
constexpr int kSuccess = 0, kErrorMemoryAllocation = 2, kErrorNotReady = 600;

Stream* of(void* stream) { return static_cast<Stream*>(stream); }

// The backend always names its stream; the legacy default stream (null) has nothing queued in a double.
void drain(void* stream) {
  if (stream) of(stream)->drain();
}

}  // namespace

SPMD_DOUBLE_EXPORT int cudaSetDevice(int) { return kSuccess; }

SPMD_DOUBLE_EXPORT int cudaMalloc(void** p, size_t bytes) {
  *p = spmd::doubles::deviceAlloc(bytes);
  return *p ? kSuccess : kErrorMemoryAllocation;
}

SPMD_DOUBLE_EXPORT int cudaFree(void* p) {
  std::free(p);
  return kSuccess;
}

SPMD_DOUBLE_EXPORT int cudaMemcpyAsync(void* dst, const void* src, size_t bytes, int /*kind*/, void* stream) {
  drain(stream);
  std::memcpy(dst, src, bytes);
  return kSuccess;
}

SPMD_DOUBLE_EXPORT int cudaMemsetAsync(void* dst, int value, size_t bytes, void* stream) {
  drain(stream);
  std::memset(dst, value, bytes);
  return kSuccess;
}

SPMD_DOUBLE_EXPORT int cudaStreamCreate(void** stream) {
  *stream = new Stream;
  return kSuccess;
}

SPMD_DOUBLE_EXPORT int cudaStreamQuery(void* stream) { return of(stream)->idle() ? kSuccess : kErrorNotReady; }

SPMD_DOUBLE_EXPORT int cudaStreamDestroy(void* stream) {
  delete of(stream);
  return kSuccess;
}

SPMD_DOUBLE_EXPORT int cudaMemGetInfo(size_t* free, size_t* total) {
  *free = *total = spmd::doubles::deviceBytes();
  return kSuccess;
}

SPMD_DOUBLE_EXPORT const char* cudaGetErrorString(int error) {
  switch (error) {
    case kSuccess: return "no error";
    case kErrorMemoryAllocation: return "out of memory (double: malloc failed)";
    case kErrorNotReady: return "device not ready";
    default: return "unknown error (double)";
  }
}
