#include "algorithms/buffers.h"
#include "algorithms/collectives.h"
#include "algorithms/peer_batch.h"
#include "algorithms/phases.h"
#include "algorithms/ranks.h"
#include "base/partition.h"
#include "kernels/cpu/reduce.h"

namespace spmd::algo {

using detail::bytes;

// allreduceRing passes out = in + offset(r) when it runs in place: `out` is written only in the last step,
// from the own block at the same address, which reduce3 allows.
void reduceScatterRing(Transport& t, Workspace& ws, const void* in, void* out, size_t count, DType dt, RedOp op) {
  const int W = t.size(), r = t.rank();
  const size_t es = elementSize(dt);
  const Partition p{count, W};
  if (W == 1) {
    detail::copyBytes(out, in, count * es);
    return;
  }
  const int right = detail::wrapRank(r + 1, W), left = detail::wrapRank(r - 1, W);
  const size_t slot = detail::slotBytes(p.block() * es);
  char* recvBufs = bytes(ws.get(2 * slot));
  const char* src = bytes(in);
  // Step s passes on the partial reduction of block r-1-s and receives that of block r-2-s, to which this
  // rank adds its own contribution; the last step (s = W-2) completes block r. Two receive buffers
  // alternate because the previous partial is still being sent while the next one arrives.
  const char* partial = src + p.offset(left) * es;
  for (int s = 0; s < W - 1; ++s) {
    const int sent = detail::wrapRank(r - 1 - s, W), got = detail::wrapRank(r - 2 - s, W);
    char* incoming = recvBufs + size_t(s & 1) * slot;
    t.sendRecv(right, partial, p.count(sent) * es, left, incoming, p.count(got) * es);
    const char* own = src + p.offset(got) * es;
    if (s == W - 2) {
      kernels::reduce3(dt, op, out, incoming, own, p.count(got));
    } else {
      kernels::reduceInto(dt, op, incoming, own, p.count(got));
      partial = incoming;
    }
  }
}

// As above, allreduceDirect may pass out = in + offset(r); foldInRankOrder allows that alias.
void reduceScatterDirect(Transport& t, Workspace& ws, const void* in, void* out, size_t count, DType dt,
                         RedOp op) {
  const int W = t.size(), r = t.rank();
  const size_t es = elementSize(dt);
  const Partition p{count, W};
  const size_t slot = detail::slotBytes(p.block() * es);
  char* slots = bytes(ws.get(size_t(W - 1) * slot));
  const char* src = bytes(in);
  detail::PeerBatch batch;
  for (int j = 0; j < W; ++j) {
    if (j == r) continue;
    batch.send(j, src + p.offset(j) * es, p.count(j) * es);
    batch.recv(j, slots + size_t(j < r ? j : j - 1) * slot, p.count(r) * es);
  }
  batch.run(t);
  detail::foldInRankOrder(dt, op, out, src + p.offset(r) * es, r, slots, slot, p.count(r), W);
}

}  // namespace spmd::algo
