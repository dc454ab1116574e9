#include "algorithms/collectives.h"
#include "algorithms/peer_batch.h"
#include "algorithms/tree.h"

namespace spmd::algo {

void broadcastTree(Transport& t, void* data, size_t n, int root) {
  const detail::BinomialTree tree(t.rank(), t.size(), root);
  if (!tree.isRoot()) t.recv(tree.parent(), data, n);
  tree.forEachChildLargestFirst([&](int child, int) { t.send(tree.rankOf(child), data, n); });
}

void broadcastDirect(Transport& t, void* data, size_t n, int root) {
  const int W = t.size();
  if (t.rank() != root) {
    t.recv(root, data, n);
    return;
  }
  detail::PeerBatch batch;
  for (int j = 0; j < W; ++j) {
    if (j != root) batch.send(j, data, n);
  }
  batch.run(t);
}

}  // namespace spmd::algo
