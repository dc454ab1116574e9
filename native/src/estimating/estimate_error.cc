#include "estimating/estimate_error.h"

#include "base/partition.h"
#include "kernels/cpu/fill.h"

namespace spmd {
EstimateError::EstimateError(Collectives& c, const void* in, size_t count, DType dt, bool mean, Layout layout)
    : dt_(dt) {
  const int W = c.size(), r = c.rank();
  const Partition part{count, W};
  offset_ = layout == Layout::Full ? part.offset(r) : 0;
  exact_.resize(part.count(r));
  sum_.assign(part.count(r), 0.0);
  // One float64 reduce per block, rooted at the block's rank: scratch never exceeds one block.
  std::vector<double, HostAllocator<double>> wide(part.block());
  for (int j = 0; j < W; ++j) {
    kernels::forEachValue(dt, in, part.offset(j), part.count(j), [&](size_t i, double v) { wide[i] = v; });
    c.reduce(wide.data(), j == r ? exact_.data() : nullptr, part.count(j), DType::F64, RedOp::Sum, j, Algo::Auto);
  }
  for (double& m : exact_) {
    if (mean) m /= W;
    exactSq_ += m * m;
  }
}

void EstimateError::observe(const void* out) {
  const double steps = double(errorSq_.size() + 1);
  double error = 0, running = 0;
  kernels::forEachValue(dt_, out, offset_, exact_.size(), [&](size_t i, double v) {
    const double m = exact_[i];
    sum_[i] += v;
    error += (v - m) * (v - m);
    running += (sum_[i] / steps - m) * (sum_[i] / steps - m);
  });
  errorSq_.push_back(error);
  runningErrorSq_.push_back(running);
}

NamedSeries EstimateError::series() const {
  return {{"exactSq", {exactSq_}}, {"errorSq", errorSq_}, {"runningErrorSq", runningErrorSq_}};
}

}  // namespace spmd
