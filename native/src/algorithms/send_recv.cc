#include "algorithms/buffers.h"
#include "algorithms/collectives.h"
#include "algorithms/ranks.h"

namespace spmd::algo {

void sendRecvPeers(Transport& t, const void* in, void* out, size_t n, int to, int from) {
  if (to == t.rank() && from == t.rank()) {
    detail::copyBytes(out, in, n);
    return;
  }
  t.sendRecv(to, in, n, from, out, n);
}

void sendRecvShift(Transport& t, const void* in, void* out, size_t n, int shift) {
  const int W = t.size(), r = t.rank(), s = detail::wrapRank(shift, W);
  sendRecvPeers(t, in, out, n, detail::wrapRank(r + s, W), detail::wrapRank(r - s, W));
}

}  // namespace spmd::algo
