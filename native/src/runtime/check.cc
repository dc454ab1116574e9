#include "runtime/check.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/partition.h"

namespace spmd {
namespace {

using kernels::fillValue;

// Unit roundoff of the type a reduction accumulates in, and of the type it is stored in.
double accumulationEps(DType dt) { return dt == DType::F64 ? 0x1.0p-53 : 0x1.0p-24; }
double storageEps(DType dt) {
  switch (dt) {
    case DType::F16: return 0x1.0p-11;
    case DType::BF16: return 0x1.0p-8;
    case DType::F64: return 0x1.0p-53;
    default: return 0x1.0p-24;
  }
}

struct Checker {
  const Program& program;
  const OpSpec& op;
  int worldSize;
  const uint8_t* out;
  DType dt;
  size_t es;
  CheckResult result;

  // Output element k must equal element `index` of `rank`'s tensor `tensor`, bit for bit.
  void copied(size_t k, int tensor, int rank, size_t index) {
    const TensorSpec& t = program.tensors[size_t(tensor)];
    alignas(8) uint8_t want[8];
    kernels::storeValue(dt, fillValue(t.fill, dt, rank, index), want);
    result.wrong += std::memcmp(out + k * es, want, es) != 0;
    ++result.checked;
  }

  // Output element k must be the reduction over all ranks of element `index` of tensor `tensor`.
  void reduced(size_t k, int tensor, size_t index) {
    const TensorSpec& t = program.tensors[size_t(tensor)];
    const RedOp rop = op.reduction.op;
    double got = kernels::loadValue(dt, out + k * es);
    ++result.checked;
    if (!isFloat(dt)) {
      uint64_t sum = 0;
      int64_t best = int64_t(fillValue(t.fill, dt, 0, index));
      for (int r = 0; r < worldSize; ++r) {
        auto v = int64_t(fillValue(t.fill, dt, r, index));
        sum += uint64_t(v);  // integer sums wrap, as the kernels' do
        best = rop == RedOp::Max ? std::max(best, v) : std::min(best, v);
      }
      int64_t want = rop == RedOp::Sum ? int64_t(sum) : best;
      if (dt == DType::I32) want = int32_t(uint32_t(uint64_t(want)));
      int64_t have = dt == DType::I64 ? *reinterpret_cast<const int64_t*>(out + k * es) : int64_t(got);
      result.wrong += have != want;
      return;
    }
    double sum = 0, absSum = 0;
    double best = fillValue(t.fill, dt, 0, index);
    for (int r = 0; r < worldSize; ++r) {
      double v = fillValue(t.fill, dt, r, index);
      sum += v;
      absSum += std::fabs(v);
      best = rop == RedOp::Max ? std::max(best, v) : std::min(best, v);
    }
    double want = rop == RedOp::Sum ? sum : best;
    double tol = rop == RedOp::Sum ? 2.0 * worldSize * accumulationEps(dt) * absSum : 0.0;
    if (op.reduction.mean) {
      want /= worldSize;
      tol /= worldSize;
    }
    tol += storageEps(dt) * std::fabs(want);
    result.wrong += !(std::fabs(got - want) <= tol);
  }
};

}  // namespace

CheckResult checkOutput(const Program& program, const OpSpec& op, int rank, int W, const std::vector<uint8_t>& output) {
  // Compressed and quantized ops only estimate the result; their error is measured (estimating/estimate_error.h).
  if (op.inputs.empty() || op.compression != Compression::None) return {};
  const TensorSpec& t0 = program.tensors[size_t(op.inputs[0])];
  Checker c{program, op, W, output.data(), t0.dtype, elementSize(t0.dtype), {}};
  const int in = op.inputs[0];
  const size_t n = t0.count;
  const Partition part{n, W};
  switch (op.kind) {
    case OpKind::AllReduce:
      for (size_t k = 0; k < n; ++k) c.reduced(k, in, k);
      break;
    case OpKind::ReduceScatter: {
      size_t k = 0;
      for (int tensor : op.inputs) {
        Partition p{program.tensors[size_t(tensor)].count, W};
        for (size_t i = 0; i < p.count(rank); ++i) c.reduced(k++, tensor, p.offset(rank) + i);
      }
      break;
    }
    case OpKind::Reduce:
      if (rank == op.root) for (size_t k = 0; k < n; ++k) c.reduced(k, in, k);
      break;
    case OpKind::Gather:
      if (rank != op.root) break;
      [[fallthrough]];
    case OpKind::AllGather:
      for (int s = 0; s < W; ++s) for (size_t i = 0; i < n; ++i) c.copied(size_t(s) * n + i, in, s, i);
      break;
    case OpKind::Broadcast:
      for (size_t k = 0; k < n; ++k) c.copied(k, in, op.root, k);
      break;
    case OpKind::Scatter:
      for (size_t k = 0; k < part.count(rank); ++k) c.copied(k, in, op.root, part.offset(rank) + k);
      break;
    case OpKind::AllToAll: {
      size_t len = part.count(rank);
      for (int j = 0; j < W; ++j) for (size_t i = 0; i < len; ++i) c.copied(j * len + i, in, j, part.offset(rank) + i);
      break;
    }
    case OpKind::SendRecv: {
      int from = int(((rank - op.shift) % W + W) % W);
      for (size_t k = 0; k < n; ++k) c.copied(k, in, from, k);
      break;
    }
    case OpKind::Barrier: case OpKind::Compute: break;
  }
  return c.result;
}

}  // namespace spmd
