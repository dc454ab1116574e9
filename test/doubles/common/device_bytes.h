// The memory the device doubles say a device has, all of it free: SPMD_DOUBLE_DEVICE_BYTES, for the tests of
// the memory plan, else 80 GiB (an H100's). Allocations are the host's whatever this says.
#pragma once
#include <cstddef>
#include <cstdlib>

namespace spmd::doubles {

inline size_t deviceBytes() {
  const char* v = std::getenv("SPMD_DOUBLE_DEVICE_BYTES");
  return v ? size_t(std::strtoull(v, nullptr, 10)) : size_t(80) << 30;
}

}  // namespace spmd::doubles
