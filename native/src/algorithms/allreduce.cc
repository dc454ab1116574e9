// Every allreduce is a reduction phase followed by a distribution phase, so every rank ends with the bytes
// one rank computed: the result is bit-identical across ranks whatever the rounding.
#include "algorithms/buffers.h"
#include "algorithms/collectives.h"
#include "algorithms/phases.h"
#include "base/partition.h"

namespace spmd::algo {

void allreduceRing(Transport& t, Workspace& ws, const void* in, void* out, size_t count, DType dt, RedOp op) {
  const size_t es = elementSize(dt);
  const Partition p{count, t.size()};
  reduceScatterRing(t, ws, in, detail::bytes(out) + p.offset(t.rank()) * es, count, dt, op);
  detail::allGatherBlocksRing(t, out, p, es);
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
