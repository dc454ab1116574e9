// How far an estimating op's output (estimating/estimating_op.h) is from the exact reduction it estimates (the sum
// or the mean over ranks), per step and for the running mean of the outputs so far, which is what error
// feedback drives towards the exact result. Each rank measures only its own block of the elements
// (Partition{count, W}), so the work and the memory split across ranks; what it reports are partial sums
// of squares that JS adds up over ranks.
#pragma once
#include <cstddef>
#include <vector>

#include "base/collectives.h"
#include "base/host_bytes.h"
#include "estimating/estimating_op.h"

namespace spmd {

class EstimateError {
 public:
  // What an output holds: all count elements (the same on every rank), or only this rank's block.
  enum class Layout { Full, Shard };

  // Collective and untimed: reduces every rank's `in` (count elements of dt) in float64, block r to rank r,
  // and keeps this rank's block of the exact sum, or of the mean when `mean`.
  EstimateError(Collectives& c, const void* in, size_t count, DType dt, bool mean, Layout layout);

  // After each step (warmup steps included): `out` is the op's output, laid out as the constructor said.
  void observe(const void* out);

  // "exactSq": {sum of exact^2}; "errorSq" and "runningErrorSq": per step, the sum of (estimate - exact)^2
  // and of (running mean of the estimates - exact)^2. All over this rank's block.
  NamedSeries series() const;

 private:
  DType dt_;
  size_t offset_ = 0;               // where this rank's block starts in an output
  // Eight bytes an element each (16Mi elements: 128 MiB), so on huge pages, as tensors are.
  std::vector<double, HostAllocator<double>> exact_;  // this rank's block of the exact result
  std::vector<double, HostAllocator<double>> sum_;    // running sum of the estimates over steps
  double exactSq_ = 0;
  std::vector<double> errorSq_, runningErrorSq_;
};

}  // namespace spmd
