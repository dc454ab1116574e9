#include "algorithms/buffers.h"
#include "algorithms/collectives.h"
#include "algorithms/peer_batch.h"
#include "base/partition.h"

namespace spmd::algo {

void allToAllDirect(Transport& t, const void* in, void* out, size_t count, size_t esize) {
  const int W = t.size(), r = t.rank();
  const Partition p{count, W};
  const size_t mine = p.count(r) * esize;
  const char* src = detail::bytes(in);
  char* dst = detail::bytes(out);
  detail::PeerBatch batch;
  for (int j = 0; j < W; ++j) {
    if (j == r) continue;
    batch.send(j, src + p.offset(j) * esize, p.count(j) * esize);
    batch.recv(j, dst + size_t(j) * mine, mine);
  }
  batch.run(t);
  detail::copyBytes(dst + size_t(r) * mine, src + p.offset(r) * esize, mine);
}

void allToAllvDirect(Transport& t, const void* in, void* out, const AllToAllvCounts& c, size_t esize) {
  const int r = t.rank();
  detail::PeerBatch batch;
  c.forEachPeer(r, in, out, esize, [&](int j, const void* data, size_t n) { batch.send(j, data, n); },
                [&](int j, void* data, size_t n) { batch.recv(j, data, n); });
  batch.run(t);
  detail::copyBytes(detail::bytes(out) + c.recvOffsets[size_t(r)] * esize, detail::bytes(in) + c.sendOffsets[size_t(r)] * esize,
                    c.sendCounts[size_t(r)] * esize);
}

}  // namespace spmd::algo
