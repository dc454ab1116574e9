// Byte-level helpers for the untyped buffers every algorithm moves.
#pragma once
#include <cstddef>
#include <cstring>

namespace spmd::algo::detail {

inline char* bytes(void* p) { return static_cast<char*>(p); }
inline const char* bytes(const void* p) { return static_cast<const char*>(p); }

// Empty blocks and in-place calls (W = 1, in == out) make null or identical pointers routine here, and
// memcpy is undefined for both even when n is 0.
inline void copyBytes(void* dst, const void* src, size_t n) {
  if (n != 0 && dst != src) std::memcpy(dst, src, n);
}

// Scratch slots start on 64-byte boundaries so every element type stays aligned and slots share no line.
inline size_t slotBytes(size_t n) { return (n + 63) & ~size_t(63); }

}  // namespace spmd::algo::detail
