// The host's large arrays: tensors as filled, op outputs, host memory's buffers. From 4 MiB up they sit on
// transparent huge pages where the kernel grants them on request (THP "madvise", a common default), so a
// first touch faults once per 2 MiB instead of once per 4 KiB. On a virtual machine, where a fault traps to
// the hypervisor, the 4 KiB faults of a fresh 256 MiB buffer cost ten times the collective that wrote it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

namespace spmd {

// 64-byte aligned (every element type, and vector loads start on a line); freed with std::free.
void* allocHost(size_t bytes);

template <class T>
struct HostAllocator {
  using value_type = T;
  HostAllocator() = default;
  template <class U>
  HostAllocator(const HostAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(allocHost(n * sizeof(T))); }
  void deallocate(T* p, size_t) { std::free(p); }
  template <class U>
  bool operator==(const HostAllocator<U>&) const { return true; }
};

using HostBytes = std::vector<uint8_t, HostAllocator<uint8_t>>;

}  // namespace spmd
