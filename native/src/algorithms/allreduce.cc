// Every allreduce is a reduction phase followed by a distribution phase, so every rank ends with the bytes
// one rank computed: the result is bit-identical across ranks whatever the rounding.
#include <algorithm>

#include "algorithms/buffers.h"
#include "algorithms/collectives.h"
#include "algorithms/peer_batch.h"
#include "algorithms/phases.h"
#include "algorithms/ranks.h"
#include "base/partition.h"
#include "kernels/cpu/reduce.h"

namespace spmd::algo {

namespace {

// Each rank's block of the Partition cut into slices of `elems` elements: the last slice of a block is
// short, and a short block has empty slices at the end.
struct Slices {
  Partition p;
  size_t elems;
  size_t perBlock() const { return std::max<size_t>(1, (p.block() + elems - 1) / elems); }
  size_t at(int b, size_t j) const { return p.offset(b) + std::min(p.count(b), j * elems); }
  size_t len(int b, size_t j) const { return std::min(p.count(b), (j + 1) * elems) - std::min(p.count(b), j * elems); }
  // Where slice j of block b sits in a buffer that holds block b alone.
  size_t within(int b, size_t j) const { return at(b, j) - p.offset(b); }
};

}  // namespace

// The ring's 2(W-1) steps (W-1 reduce-scatter steps, then W-1 all-gather steps) over blocks cut into
// slices: step s of slice j moves in exchange s + j, beside slice j-1 of step s+1 and so on. A slice goes
// on to its next step as soon as it was reduced, so the all-gather starts long before the reduce-scatter
// ends, and each slice is reduced right after it arrived, while it is still in cache.
void allreduceRing(Transport& t, Workspace& ws, const void* in, void* out, size_t count, DType dt, RedOp op, size_t sliceBytes) {
  const int W = t.size(), r = t.rank();
  const size_t es = elementSize(dt);
  const Partition p{count, W};
  if (W == 1) {
    detail::copyBytes(out, in, count * es);
    return;
  }
  const int right = detail::wrapRank(r + 1, W), left = detail::wrapRank(r - 1, W), steps = 2 * (W - 1);
  const Slices sl{p, std::max<size_t>(1, sliceBytes ? sliceBytes / es : p.block())};
  const size_t slot = detail::slotBytes(p.block() * es);
  // Reduce-scatter step s receives partials into slot s % 2, from which step s+1 sends them on.
  char* partials = detail::bytes(ws.get(2 * slot));
  auto partial = [&](int s, int b, size_t j) { return partials + size_t(s & 1) * slot + sl.within(b, j) * es; };
  const char* src = detail::bytes(in);
  char* dst = detail::bytes(out);
  const size_t exchanges = sl.perBlock() + size_t(steps) - 1;
  for (size_t k = 0; k < exchanges; ++k) {
    // The steps with a slice in this exchange, s ascending on every rank: the pair's FIFO matches them up.
    const int first = int(k < sl.perBlock() ? 0 : k - sl.perBlock() + 1), last = std::min(steps - 1, int(k));
    detail::PeerBatch batch;
    for (int s = first; s <= last; ++s) {
      const size_t j = k - size_t(s);
      if (s < W - 1) {
        const int sent = detail::wrapRank(r - 1 - s, W), got = detail::wrapRank(r - 2 - s, W);
        batch.send(right, s == 0 ? src + sl.at(sent, j) * es : partial(s - 1, sent, j), sl.len(sent, j) * es);
        batch.recv(left, partial(s, got, j), sl.len(got, j) * es);
      } else {
        const int g = s - (W - 1), sent = detail::wrapRank(r - g, W), got = detail::wrapRank(r - g - 1, W);
        batch.send(right, dst + sl.at(sent, j) * es, sl.len(sent, j) * es);
        batch.recv(left, dst + sl.at(got, j) * es, sl.len(got, j) * es);
      }
    }
    batch.run(t);
    for (int s = first; s <= std::min(last, W - 2); ++s) {
      const size_t j = k - size_t(s);
      const int got = detail::wrapRank(r - 2 - s, W);
      const char* own = src + sl.at(got, j) * es;
      // The last reduce-scatter step completes this rank's own block, in `out` (in place: at `own`).
      if (s == W - 2) kernels::reduce3(dt, op, dst + sl.at(got, j) * es, partial(s, got, j), own, sl.len(got, j));
      else kernels::reduceInto(dt, op, partial(s, got, j), own, sl.len(got, j));
    }
  }
}

void allreduceDirect(Transport& t, Workspace& ws, const void* in, void* out, size_t count, DType dt, RedOp op) {
  const size_t es = elementSize(dt);
  const Partition p{count, t.size()};
  reduceScatterDirect(t, ws, in, detail::bytes(out) + p.offset(t.rank()) * es, count, dt, op);
  detail::allGatherBlocksDirect(t, out, p, es);
}

void allreduceTree(Transport& t, Workspace& ws, const void* in, void* out, size_t count, DType dt, RedOp op) {
  const size_t n = count * elementSize(dt);
  detail::reduceTreeInto(t, in, out, ws.get(n), count, dt, op, 0);
  broadcastTree(t, out, n, 0);
}

}  // namespace spmd::algo
