// How far an estimate of the mean over ranks (compressed_allreduce's output) is from the exact mean, per
// step and for the running mean of the estimates so far, which is what error feedback drives towards the
// exact mean. Each rank measures only its own block of the elements (Partition{count, W}), so the work and
// the memory split across ranks; what it reports are partial sums of squares that JS adds up over ranks.
#pragma once
#include <cstddef>
#include <vector>

#include "core/collectives.h"
#include "core/program.h"

namespace spmd {

class MeanError {
 public:
  // Collective and untimed: reduces every rank's `in` (count elements of dt) in float64, block r to rank r,
  // and keeps this rank's block of the exact mean.
  MeanError(Collectives& c, const void* in, size_t count, DType dt);

  // After each step (warmup steps included): `out` holds count elements of dt, the same on every rank.
  void observe(const void* out);

  // "exactSq": {sum of mean^2}; "errorSq" and "runningErrorSq": per step, the sum of (estimate - mean)^2 and
  // of (running mean of the estimates - mean)^2. All over this rank's block.
  NamedSeries series() const;

 private:
  DType dt_;
  size_t offset_ = 0;
  std::vector<double> exact_;       // this rank's block of the exact mean
  std::vector<double> sum_;         // running sum of the estimates over steps
  double exactSq_ = 0;
  std::vector<double> errorSq_, runningErrorSq_;
};

}  // namespace spmd
