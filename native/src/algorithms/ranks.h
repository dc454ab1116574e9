// Rank arithmetic on the ring 0..W-1.
#pragma once

namespace spmd::algo::detail {

// x mod W in [0, W) for any int x, negative included (C++ % keeps the dividend's sign).
inline int wrapRank(int x, int W) {
  int m = x % W;
  return m < 0 ? m + W : m;
}

}  // namespace spmd::algo::detail
