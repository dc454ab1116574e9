// The host's large arrays: tensors as filled, op outputs, host memory's buffers. From 2 MiB up they start on a
// 2 MiB boundary and their whole 2 MiB pages are advised onto transparent huge pages where the kernel grants them
// on request (THP "madvise", a common default); the tail past the last whole page stays on 4 KiB pages, so no
// byte more is resident. A first touch then faults once per 2 MiB instead of once per 4 KiB (on a virtual machine,
// where a fault traps to the hypervisor, the 4 KiB faults of a fresh 256 MiB buffer cost ten times the collective
// that wrote it), and a peer's process_vm_readv walks one page-table entry per 2 MiB: a W = 2 all_gather of 2 MiB
// inputs ran 1.6-1.7x faster than with the threshold at 4 MiB, where those inputs sat on 4 KiB pages
// (docs/PERFORMANCE.md, "Huge pages from 2 MiB").
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
