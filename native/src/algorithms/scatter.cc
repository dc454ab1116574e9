#include "algorithms/buffers.h"
#include "algorithms/collectives.h"
#include "algorithms/peer_batch.h"
#include "algorithms/tree.h"
#include "base/partition.h"

namespace spmd::algo {

using detail::bytes;

void scatterDirect(Transport& t, const void* in, void* out, size_t count, size_t esize, int root) {
  const int W = t.size(), r = t.rank();
  const Partition p{count, W};
  if (r != root) {
    t.recv(root, out, p.count(r) * esize);
    return;
  }
  detail::PeerBatch batch;
  for (int j = 0; j < W; ++j) {
    if (j != root) batch.send(j, bytes(in) + p.offset(j) * esize, p.count(j) * esize);
  }
  batch.run(t);
  detail::copyBytes(out, bytes(in) + p.offset(root) * esize, p.count(root) * esize);
}

void scatterTree(Transport& t, Workspace& ws, const void* in, void* out, size_t count, size_t esize, int root) {
  const int W = t.size(), r = t.rank();
  const Partition p{count, W};
  const detail::BinomialTree tree(r, W, root);
  // The blocks in relative-rank order are the input rotated to start at the root's block, so a subtree's
  // blocks are one contiguous range. Blocks differ in size (the last ones short or empty), so where relative
  // rank v starts is found from the partition, never from v times a block size.
  auto start = [&](int v) -> size_t {
    if (v == W) return count;
    const int a = tree.rankOf(v);
    const size_t base = p.offset(root);
    return a >= root ? p.offset(a) - base : count - base + p.offset(a);
  };
  const size_t first = start(tree.vrank());
  const size_t mine = p.count(r) * esize;
  const char* sub;  // this subtree's blocks, relative element `first` onwards
  if (tree.isRoot()) {
    if (root == 0) {
      sub = bytes(in);
    } else {
      char* rotated = bytes(ws.get(count * esize));
      const size_t base = p.offset(root) * esize;
      detail::copyBytes(rotated, bytes(in) + base, count * esize - base);
      detail::copyBytes(rotated + count * esize - base, in, base);
      sub = rotated;
    }
  } else {
    const size_t n = (start(tree.vrank() + tree.span()) - first) * esize;
    if (tree.span() == 1) {
      t.recv(tree.parent(), out, n);
      return;
    }
    char* received = bytes(ws.get(n));
    t.recv(tree.parent(), received, n);
    sub = received;
  }
  tree.forEachChildLargestFirst([&](int child, int span) {
    const size_t b = start(child), e = start(child + span);
    t.send(tree.rankOf(child), sub + (b - first) * esize, (e - b) * esize);
  });
  detail::copyBytes(out, sub, mine);
}

}  // namespace spmd::algo
