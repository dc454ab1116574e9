#include "algorithms/buffers.h"
#include "algorithms/collectives.h"
#include "algorithms/ranks.h"

namespace spmd::algo {

void sendRecvShift(Transport& t, const void* in, void* out, size_t n, int shift) {
  const int W = t.size(), r = t.rank();
  const int s = detail::wrapRank(shift, W);
  if (s == 0) {
    detail::copyBytes(out, in, n);
    return;
  }
  t.sendRecv(detail::wrapRank(r + s, W), in, n, detail::wrapRank(r - s, W), out, n);
}

}  // namespace spmd::algo
