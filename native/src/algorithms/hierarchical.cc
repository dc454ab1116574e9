// The hierarchical allreduce. Its pieces stream through the 2H steps (the reduce-scatter inside the node,
// H-1 ring reduce-scatter and H-1 ring all-gather steps across nodes, the all-gather inside the node) as a
// wavefront, as the ring's slices do: step s of piece j moves in exchange s + j, beside piece j+1's step s-1,
// so the links inside a node and those between nodes work at once. Each rank sends 1/L of the data between
// nodes, and the L ranks of a node do so at once. Every block is reduced by one rank and copied to the
// others, so the result is bit-identical on every rank.
#include <algorithm>

#include "algorithms/buffers.h"
#include "algorithms/collectives.h"
#include "algorithms/peer_batch.h"
#include "algorithms/ranks.h"
#include "base/partition.h"
#include "kernels/cpu/reduce.h"

namespace spmd::algo {
namespace {

int indexOf(const std::vector<int>& ranks, int r) { return int(std::find(ranks.begin(), ranks.end(), r) - ranks.begin()); }

// The array cut into pieces of `elems` elements (the last one short), each piece into L node blocks, and
// this rank's node block (index `li`) into H blocks across nodes.
struct Pieces {
  size_t count, elems;
  int L, H, li;
  size_t at(size_t j) const { return std::min(count, j * elems); }
  Partition node(size_t j) const { return {std::min(count, (j + 1) * elems) - at(j), L}; }
  Partition across(size_t j) const { return {node(j).count(li), H}; }
  // Where this rank's node block of piece j starts in the array.
  size_t mine(size_t j) const { return at(j) + node(j).offset(li); }
};

}  // namespace

void allreduceHierarchical(Transport& t, Workspace& ws, const NodeGroups& g, const void* in, void* out, size_t count,
                           DType dt, RedOp op, size_t sliceBytes) {
  using detail::wrapRank;
  const int L = int(g.node.size()), H = int(g.across.size());
  const int li = indexOf(g.node, t.rank()), hi = indexOf(g.across, t.rank());
  const size_t es = elementSize(dt);
  const size_t blockElems = std::max<size_t>(1, sliceBytes ? sliceBytes / es : (count + size_t(L) - 1) / size_t(L));
  const Pieces pc{count, blockElems * size_t(L), L, H, li};
  const size_t pieces = std::max<size_t>(1, (count + pc.elems - 1) / pc.elems);
  const int steps = 2 * H, right = g.across[size_t(wrapRank(hi + 1, H))], left = g.across[size_t(wrapRank(hi - 1, H))];
  // Scratch: the node's other contributions to this rank's block at step 0, then, for the ring across, two
  // alternating slots of partials per piece (several pieces are in the ring at once).
  const size_t block = detail::slotBytes(blockElems * es);
  char* gathered = detail::bytes(ws.get(size_t(L - 1) * block + 2 * pieces * block));
  char* partials = gathered + size_t(L - 1) * block;
  auto partial = [&](int s, size_t j, int b) { return partials + (size_t(s & 1) * pieces + j) * block + pc.across(j).offset(b) * es; };
  const char* src = detail::bytes(in);
  char* dst = detail::bytes(out);
  for (size_t k = 0; k < pieces + size_t(steps) - 1; ++k) {
    // The steps with a piece in this exchange, s ascending on every rank: each pair's FIFO matches them up.
    const int first = int(k < pieces ? 0 : k - pieces + 1), last = std::min(steps - 1, int(k));
    detail::PeerBatch batch;
    for (int s = first; s <= last; ++s) {
      const size_t j = k - size_t(s);
      const Partition np = pc.node(j), ap = pc.across(j);
      char* mine = dst + pc.mine(j) * es;
      if (s == 0 || s == steps - 1) {  // inside the node: block q to (s = 0) or from (the last step) node rank q
        for (int q = 0, slot = 0; q < L; ++q) {
          if (q == li) continue;
          const size_t theirs = (pc.at(j) + np.offset(q)) * es;
          batch.send(g.node[size_t(q)], s == 0 ? src + theirs : mine, np.count(s == 0 ? q : li) * es);
          batch.recv(g.node[size_t(q)], s == 0 ? gathered + size_t(slot++) * block : dst + theirs, np.count(s == 0 ? li : q) * es);
        }
      } else if (s < H) {  // ring reduce-scatter step s-1 across nodes
        const int rs = s - 1, sent = wrapRank(hi - 1 - rs, H), got = wrapRank(hi - 2 - rs, H);
        batch.send(right, rs == 0 ? mine + ap.offset(sent) * es : partial(rs - 1, j, sent), ap.count(sent) * es);
        batch.recv(left, partial(rs, j, got), ap.count(got) * es);
      } else {  // ring all-gather step s-H across nodes
        const int sent = wrapRank(hi - (s - H), H), got = wrapRank(hi - (s - H) - 1, H);
        batch.send(right, mine + ap.offset(sent) * es, ap.count(sent) * es);
        batch.recv(left, mine + ap.offset(got) * es, ap.count(got) * es);
      }
    }
    batch.run(t);
    // Reduce what arrived. In place, the node block written at step 0 is the input's, already sent.
    for (int s = first; s <= std::min(last, H - 1); ++s) {
      const size_t j = k - size_t(s);
      char* mine = dst + pc.mine(j) * es;
      if (s == 0) {
        const size_t n = pc.node(j).count(li);
        if (L == 1) detail::copyBytes(mine, src + pc.mine(j) * es, n * es);
        else kernels::reduce3(dt, op, mine, gathered, src + pc.mine(j) * es, n);
        for (int q = 1; q < L - 1; ++q) kernels::reduceInto(dt, op, mine, gathered + size_t(q) * block, n);
        continue;
      }
      const int rs = s - 1, got = wrapRank(hi - 2 - rs, H);
      const Partition ap = pc.across(j);
      char* own = mine + ap.offset(got) * es;
      // The last reduce-scatter step completes this rank's block across nodes, in place in `out`.
      if (rs == H - 2) kernels::reduce3(dt, op, own, partial(rs, j, got), own, ap.count(got));
      else kernels::reduceInto(dt, op, partial(rs, j, got), own, ap.count(got));
    }
  }
}

}  // namespace spmd::algo
