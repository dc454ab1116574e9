// Comparing secrets' proofs (the tcp transport's key, a shm segment's tag) without leaking, through the
// time it takes, how much of a guess was right.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

namespace spmd {

template <size_t N>
bool sameBytes(const std::array<uint8_t, N>& a, const std::array<uint8_t, N>& b) {
  uint8_t diff = 0;
  for (size_t i = 0; i < N; ++i) diff |= uint8_t(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace spmd
