// Reductions for every job dtype and reduce kind on top of a backend's Collectives: float16/bfloat16 are
// widened to float32 for the whole collective (so partial sums never round to 16 bits) and "mean" is a
// sum divided by W once at the end, both with the kernels of the memory the lane's pointers point into.
#pragma once
#include <cstddef>

#include "base/collectives.h"
#include "kernels/memory.h"

namespace spmd {

struct Reduction {
  RedOp op = RedOp::Sum;
  bool mean = false;
};

class TypedOps {
 public:
  explicit TypedOps(Memory& m) : m_(m), wideIn_(m), wideOut_(m) {}
  void allreduce(Collectives& c, const void* in, void* out, size_t count, DType dt, Reduction r, Algo a);
  // out holds Partition{count, W}.count(rank) elements.
  void reduceScatter(Collectives& c, const void* in, void* out, size_t count, DType dt, Reduction r, Algo a);
  // out is written on root only.
  void reduce(Collectives& c, const void* in, void* out, size_t count, DType dt, Reduction r, int root, Algo a);

 private:
  template <typename Run>
  void typed(Collectives& c, const void* in, void* out, size_t inCount, size_t outCount, DType dt, Reduction r, Run run);

  Memory& m_;
  Scratch wideIn_, wideOut_;
};

}  // namespace spmd
