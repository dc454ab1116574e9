// Binomial (MST) tree over ranks relative to the root (v = r - root mod W). The parent of v is v with its
// lowest set bit cleared; the children of v are v + m for powers of two m below that bit (below W for the
// root). Each subtree is the contiguous relative range [v, v + span), which is what lets gather and scatter
// move a whole subtree as one message.
#pragma once
#include <algorithm>
#include <bit>

#include "algorithms/ranks.h"

namespace spmd::algo::detail {

class BinomialTree {
 public:
  BinomialTree(int rank, int size, int root)
      : size_(size), root_(root), vrank_(wrapRank(rank - root, size)) {
    const int lowBit = vrank_ & -vrank_;
    span_ = vrank_ == 0 ? size : std::min(lowBit, size - vrank_);
  }

  bool isRoot() const { return vrank_ == 0; }
  int vrank() const { return vrank_; }
  // Relative ranks [vrank, vrank + span) are this rank's subtree.
  int span() const { return span_; }
  int rankOf(int v) const { return (v + root_) % size_; }
  int parent() const { return rankOf(vrank_ & (vrank_ - 1)); }

  // f(child's relative rank, child's span). Smallest subtrees first: they are the first to finish, so a
  // reduction or gather waits the least.
  template <class F>
  void forEachChildSmallestFirst(F&& f) const {
    for (int m = 1; m < span_; m <<= 1) f(vrank_ + m, std::min(m, span_ - m));
  }
  // Largest subtrees first: they have the most forwarding left to do (the binomial broadcast schedule).
  template <class F>
  void forEachChildLargestFirst(F&& f) const {
    for (int m = int(std::bit_floor(unsigned(span_ - 1))); m > 0; m >>= 1) f(vrank_ + m, std::min(m, span_ - m));
  }

 private:
  int size_;
  int root_;
  int vrank_;
  int span_;
};

}  // namespace spmd::algo::detail
