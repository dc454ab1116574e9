#include "algorithms/collectives.h"
#include "algorithms/ranks.h"

namespace spmd::algo {

// After the round with distance d, each rank has heard (directly or through others) from the 2d ranks
// before it, so ceil(log2 W) rounds reach everyone.
void barrierDissemination(Transport& t) {
  const int W = t.size(), r = t.rank();
  const char token = 0;
  char received;
  for (int d = 1; d < W; d <<= 1) {
    t.sendRecv(detail::wrapRank(r + d, W), &token, 1, detail::wrapRank(r - d, W), &received, 1);
  }
}

}  // namespace spmd::algo
