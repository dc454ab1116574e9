#include "base/host_bytes.h"

#include <sys/mman.h>

#include <cstdlib>

namespace spmd {

void* allocHost(size_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  const bool huge = bytes >= kHuge;
  const size_t align = huge ? kHuge : 64;
  void* p = std::aligned_alloc(align, (bytes + align - 1) & ~(align - 1));
  if (!p) throw std::bad_alloc();
  if (huge) madvise(p, bytes & ~(kHuge - 1), MADV_HUGEPAGE);  // advice: where THP is off nothing changes
  return p;
}

}  // namespace spmd
