// The memory the device doubles say a device has, all of it free: SPMD_DOUBLE_DEVICE_BYTES, for the tests of
// the memory plan, else 80 GiB (an H100's). Allocations are the host's whatever this says, except those
// SPMD_DOUBLE_MALLOC_REFUSE_ABOVE refuses.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <new>

#include "base/host_bytes.h"

namespace spmd::doubles {

inline size_t deviceBytes() {
  const char* v = std::getenv("SPMD_DOUBLE_DEVICE_BYTES");
  return v ? size_t(std::strtoull(v, nullptr, 10)) : size_t(80) << 30;
}

// An allocation above SPMD_DOUBLE_MALLOC_REFUSE_ABOVE bytes fails as the device's out-of-memory does: memory
// another process took after the memory plan's check, which no plan can foresee.
inline bool mallocRefused(size_t bytes) {
  const char* v = std::getenv("SPMD_DOUBLE_MALLOC_REFUSE_ABOVE");
  return v && bytes > size_t(std::strtoull(v, nullptr, 10));
}

// A device allocation: host memory as the project's host buffers take it (huge pages from 2 MiB: a fresh
// buffer's 4 KiB faults cost a virtual machine more than the collective that writes it), freed with std::free;
// null where refused or out of memory.
inline void* deviceAlloc(size_t bytes) {
  if (mallocRefused(bytes)) return nullptr;
  try {
    return allocHost(bytes ? bytes : 1);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

}  // namespace spmd::doubles
