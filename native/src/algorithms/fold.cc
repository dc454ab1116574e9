#include <algorithm>

#include "algorithms/buffers.h"
#include "algorithms/phases.h"
#include "kernels/cpu/reduce.h"

namespace spmd::algo::detail {

void foldInRankOrder(DType dt, RedOp op, void* dst, const void* ownData, int own, void* slots, size_t stride,
                     size_t count, int W) {
  if (W == 1) {
    copyBytes(dst, ownData, count * elementSize(dt));
    return;
  }
  auto x = [&](int j) -> const void* {
    return j == own ? ownData : bytes(slots) + size_t(j < own ? j : j - 1) * stride;
  };
  // dst may be x_own itself, so it is first written when x_own is consumed; the ranks before it fold into
  // slot 0, which is scratch whenever own > 0. The operation sequence is the same for every own.
  const int first = std::max(own, 1);
  for (int j = 1; j < first; ++j) kernels::reduceInto(dt, op, slots, x(j), count);
  kernels::reduce3(dt, op, dst, x(0), x(first), count);
  for (int j = first + 1; j < W; ++j) kernels::reduceInto(dt, op, dst, x(j), count);
}

}  // namespace spmd::algo::detail
