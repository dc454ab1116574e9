// Steps that several collectives share: the direct allreduce finishes with a block-wise all-gather (blocks
// of unequal size), the tree allreduce is a tree reduce that accumulates into every rank's output, and the
// direct reductions fold received blocks in one fixed order.
#pragma once
#include <cstddef>

#include "base/dtype.h"
#include "base/partition.h"
#include "base/transport.h"

namespace spmd::algo::detail {

// `data` holds Partition p's block r (elements of `esize` bytes); afterwards it holds every block.
void allGatherBlocksDirect(Transport& t, void* data, Partition p, size_t esize);

// Binomial-tree reduction whose result lands in `acc` on the root. `acc` (count elements, may alias `in`)
// is written on ranks with children and on the root; `tmp` (count elements) receives children's data.
void reduceTreeInto(Transport& t, const void* in, void* acc, void* tmp, size_t count, DType dt, RedOp op,
                    int root);

// dst = x_0 op x_1 op ... op x_{W-1}, always folded left to right so the rounding never depends on which
// rank computes it. x_own is `ownData`; the others sit in `slots` in rank order (own skipped), `stride`
// bytes apart, and are clobbered. dst may alias ownData.
void foldInRankOrder(DType dt, RedOp op, void* dst, const void* ownData, int own, void* slots, size_t stride,
                     size_t count, int W);

}  // namespace spmd::algo::detail
