#include "algorithms/buffers.h"
#include "algorithms/collectives.h"
#include "algorithms/peer_batch.h"
#include "algorithms/tree.h"

namespace spmd::algo {

using detail::bytes;

void gatherDirect(Transport& t, const void* in, void* out, size_t n, int root) {
  const int W = t.size();
  if (t.rank() != root) {
    t.send(root, in, n);
    return;
  }
  detail::PeerBatch batch;
  for (int j = 0; j < W; ++j) {
    if (j != root) batch.recv(j, bytes(out) + size_t(j) * n, n);
  }
  batch.run(t);
  detail::copyBytes(bytes(out) + size_t(root) * n, in, n);
}

void gatherTree(Transport& t, Workspace& ws, const void* in, void* out, size_t n, int root) {
  const int W = t.size();
  const detail::BinomialTree tree(t.rank(), W, root);
  if (!tree.isRoot() && tree.span() == 1) {
    t.send(tree.parent(), in, n);
    return;
  }
  // The subtree's inputs are collected in relative-rank order, own first. Relative order is rank order only
  // at root 0, so any other root collects in scratch and rotates at the end.
  char* sub = tree.isRoot() && root == 0 ? bytes(out) : bytes(ws.get(size_t(tree.span()) * n));
  detail::copyBytes(sub, in, n);
  detail::PeerBatch batch;
  tree.forEachChildSmallestFirst([&](int child, int span) {
    batch.recv(tree.rankOf(child), sub + size_t(child - tree.vrank()) * n, size_t(span) * n);
  });
  batch.run(t);
  if (!tree.isRoot()) {
    t.send(tree.parent(), sub, size_t(tree.span()) * n);
  } else if (sub != out) {
    detail::copyBytes(bytes(out) + size_t(root) * n, sub, size_t(W - root) * n);
    detail::copyBytes(out, sub + size_t(W - root) * n, size_t(root) * n);
  }
}

}  // namespace spmd::algo
