#include "algorithms/typed_ops.h"

#include "base/partition.h"

namespace spmd {

// run(in, out, dtype) performs the plain collective; this wraps it with widening and the mean's division.
template <typename Run>
void TypedOps::typed(Collectives& c, const void* in, void* out, size_t inCount, size_t outCount, DType dt,
                     Reduction r, Run run) {
  if (!isHalf(dt)) {
    run(in, out, dt);
    if (r.mean && out) m_.kernels().divideInPlace(dt, out, outCount, c.size());
    return;
  }
  kernels::DeviceKernels& k = m_.kernels();
  auto* wi = static_cast<float*>(wideIn_.get(inCount * sizeof(float)));
  auto* wo = static_cast<float*>(wideOut_.get(outCount * sizeof(float)));
  k.toF32(dt, in, wi, inCount);
  run(wi, out ? wo : nullptr, DType::F32);
  if (!out) return;
  if (r.mean) k.divideInPlace(DType::F32, wo, outCount, c.size());
  k.fromF32(dt, wo, out, outCount);
}

void TypedOps::allreduce(Collectives& c, const void* in, void* out, size_t count, DType dt, Reduction r, Algo a) {
  typed(c, in, out, count, count, dt, r,
        [&](const void* i, void* o, DType t) { c.allreduce(i, o, count, t, r.op, a); });
}

void TypedOps::reduceScatter(Collectives& c, const void* in, void* out, size_t count, DType dt, Reduction r, Algo a) {
  size_t mine = Partition{count, c.size()}.count(c.rank());
  typed(c, in, out, count, mine, dt, r,
        [&](const void* i, void* o, DType t) { c.reduceScatter(i, o, count, t, r.op, a); });
}

void TypedOps::reduce(Collectives& c, const void* in, void* out, size_t count, DType dt, Reduction r, int root,
                      Algo a) {
  bool isRoot = c.rank() == root;
  typed(c, in, isRoot ? out : nullptr, count, isRoot ? count : 0, dt, r,
        [&](const void* i, void* o, DType t) { c.reduce(i, o, count, t, r.op, root, a); });
}

}  // namespace spmd
