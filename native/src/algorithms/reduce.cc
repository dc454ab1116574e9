#include "algorithms/buffers.h"
#include "algorithms/collectives.h"
#include "algorithms/peer_batch.h"
#include "algorithms/phases.h"
#include "algorithms/tree.h"
#include "kernels/cpu/reduce.h"

namespace spmd::algo {
namespace detail {

void reduceTreeInto(Transport& t, const void* in, void* acc, void* tmp, size_t count, DType dt, RedOp op,
                    int root) {
  const BinomialTree tree(t.rank(), t.size(), root);
  const size_t n = count * elementSize(dt);
  // A leaf forwards its input untouched; the first child's data is combined with `in` straight into acc.
  const void* partial = in;
  tree.forEachChildSmallestFirst([&](int child, int) {
    t.recv(tree.rankOf(child), tmp, n);
    kernels::reduce3(dt, op, acc, partial, tmp, count);
    partial = acc;
  });
  if (tree.isRoot()) {
    copyBytes(acc, partial, n);
  } else {
    t.send(tree.parent(), partial, n);
  }
}

}  // namespace detail

void reduceTree(Transport& t, Workspace& ws, const void* in, void* out, size_t count, DType dt, RedOp op,
                int root) {
  const size_t slot = detail::slotBytes(count * elementSize(dt));
  char* scratch = detail::bytes(ws.get(2 * slot));
  void* acc = t.rank() == root ? out : scratch + slot;
  detail::reduceTreeInto(t, in, acc, scratch, count, dt, op, root);
}

void reduceDirect(Transport& t, Workspace& ws, const void* in, void* out, size_t count, DType dt, RedOp op,
                  int root) {
  const int W = t.size();
  const size_t n = count * elementSize(dt);
  if (t.rank() != root) {
    t.send(root, in, n);
    return;
  }
  const size_t slot = detail::slotBytes(n);
  char* slots = detail::bytes(ws.get(size_t(W - 1) * slot));
  detail::PeerBatch batch;
  for (int j = 0; j < W; ++j) {
    if (j != root) batch.recv(j, slots + size_t(j < root ? j : j - 1) * slot, n);
  }
  batch.run(t);
  detail::foldInRankOrder(dt, op, out, in, root, slots, slot, count, W);
}

}  // namespace spmd::algo
