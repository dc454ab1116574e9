// How an array of n elements is cut into one block per rank: blocks of ceil(n/W), the last ones short or
// empty (DESIGN.md, reduce_scatter). Every block-wise collective uses this one rule.
#pragma once
#include <algorithm>
#include <cstddef>

namespace spmd {

struct Partition {
  size_t total;
  int parts;
  size_t block() const { return parts ? (total + size_t(parts) - 1) / size_t(parts) : 0; }
  size_t offset(int i) const { return std::min(total, size_t(i) * block()); }
  size_t count(int i) const { return std::min(total, offset(i) + block()) - offset(i); }
};

}  // namespace spmd
