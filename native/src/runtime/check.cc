#include "runtime/check.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/partition.h"

namespace spmd {
namespace {

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

// Elements are regenerated and compared a block at a time, so the fill's loop runs without per-element
// dispatch (checks of 64Mi-element outputs on 8 ranks are otherwise slower than the run).
constexpr size_t kBlock = 4096;

struct Checker {
  const Program& program;
  const OpSpec& op;
  int worldSize;
  const std::vector<int>& members;
  const uint8_t* out;
  DType dt;
  size_t es;
  CheckResult result;
  std::vector<uint8_t> want = std::vector<uint8_t>(kBlock * 8);
  std::vector<double> values = std::vector<double>(kBlock * size_t(worldSize));

  const kernels::Fill& fill(int tensor) const { return program.tensors[size_t(tensor)].fill; }
  // The rank whose fill made group rank r's input.
  int filledBy(int r) const { return members.empty() ? r : members[size_t(r)]; }

  void wrongAt(Mismatch m) {
    ++result.wrong;
    if (result.mismatches.size() < kMaxMismatches) result.mismatches.push_back(m);
  }

  // Output elements [k, k + len) must equal elements [index, index + len) of `rank`'s tensor `tensor`, bit
  // for bit.
  void copied(size_t k, int tensor, int rank, size_t index, size_t len) {
    for (size_t at = 0; at < len; at += kBlock) {
      const size_t m = std::min(kBlock, len - at);
      kernels::fillBuffer(fill(tensor), dt, filledBy(rank), want.data(), m, index + at);
      const uint8_t* got = out + (k + at) * es;
      for (size_t i = 0; i < m; ++i) {
        if (std::memcmp(got + i * es, want.data() + i * es, es) == 0) continue;
        wrongAt({k + at + i, tensor, index + at + i, filledBy(rank), kernels::loadValue(dt, want.data() + i * es), kernels::loadValue(dt, got + i * es)});
      }
      result.checked += m;
    }
  }

  // Output elements [k, k + len) must be the reduction over all ranks of elements [index, index + len) of
  // tensor `tensor`.
  void reduced(size_t k, int tensor, size_t index, size_t len) {
    for (size_t at = 0; at < len; at += kBlock) {
      const size_t m = std::min(kBlock, len - at);
      for (int r = 0; r < worldSize; ++r) kernels::fillValues(fill(tensor), dt, filledBy(r), index + at, m, &values[size_t(r) * kBlock]);
      for (size_t i = 0; i < m; ++i) {
        double want = 0;
        if (isFloat(dt) ? floatReduced(k + at + i, i, want) : integerReduced(k + at + i, i, want)) continue;
        wrongAt({k + at + i, tensor, index + at + i, -1, want, kernels::loadValue(dt, out + (k + at + i) * es)});
      }
      result.checked += m;
    }
  }

  // Whether output element k holds the reduction of column i of `values` (`expected`: that reduction).
  bool integerReduced(size_t k, size_t i, double& expected) const {
    const RedOp rop = op.reduction.op;
    uint64_t sum = 0;
    int64_t best = int64_t(values[i]);
    for (int r = 0; r < worldSize; ++r) {
      auto v = int64_t(values[size_t(r) * kBlock + i]);
      sum += uint64_t(v);  // integer sums wrap, as the kernels' do
      best = rop == RedOp::Max ? std::max(best, v) : std::min(best, v);
    }
    int64_t want = rop == RedOp::Sum ? int64_t(sum) : best;
    if (dt == DType::I32) want = int32_t(uint32_t(uint64_t(want)));
    const int64_t have = dt == DType::I64 ? *reinterpret_cast<const int64_t*>(out + k * es) : int64_t(kernels::loadValue(dt, out + k * es));
    expected = double(want);
    return have == want;
  }

  bool floatReduced(size_t k, size_t i, double& expected) const {
    const RedOp rop = op.reduction.op;
    double sum = 0, absSum = 0, best = values[i];
    for (int r = 0; r < worldSize; ++r) {
      const double v = values[size_t(r) * kBlock + i];
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
    expected = want;
    return std::fabs(kernels::loadValue(dt, out + k * es) - want) <= tol;
  }
};

}  // namespace

CheckResult checkOutput(const Program& program, const OpSpec& op, int rank, int W, const HostBytes& output,
                        const std::vector<int>& members) {
  // Compressed and quantized ops only estimate the result; their error is measured (estimating/estimate_error.h).
  if (op.inputs.empty() || op.compression != Compression::None) return {};
  const TensorSpec& t0 = program.tensors[size_t(op.inputs[0])];
  Checker c{program, op, W, members, output.data(), t0.dtype, elementSize(t0.dtype), {}};
  const int in = op.inputs[0];
  const size_t n = t0.count;
  const Partition part{n, W};
  switch (op.kind) {
    case OpKind::AllReduce:
      c.reduced(0, in, 0, n);
      break;
    case OpKind::ReduceScatter: {
      size_t k = 0;
      for (int tensor : op.inputs) {
        Partition p{program.tensors[size_t(tensor)].count, W};
        c.reduced(k, tensor, p.offset(rank), p.count(rank));
        k += p.count(rank);
      }
      break;
    }
    case OpKind::Reduce:
      if (rank == op.root) c.reduced(0, in, 0, n);
      break;
    case OpKind::Gather:
      if (rank != op.root) break;
      [[fallthrough]];
    case OpKind::AllGather:
      for (int s = 0; s < W; ++s) c.copied(size_t(s) * n, in, s, 0, n);
      break;
    case OpKind::Broadcast:
      c.copied(0, in, op.root, 0, n);
      break;
    case OpKind::Scatter:
      c.copied(0, in, op.root, part.offset(rank), part.count(rank));
      break;
    case OpKind::AllToAll:
      for (int j = 0; j < W; ++j) c.copied(size_t(j) * part.count(rank), in, j, part.offset(rank), part.count(rank));
      break;
    case OpKind::AllToAllv: {
      // Rank j's block for this rank starts after its blocks for the ranks before this one.
      const std::vector<size_t>& m = op.counts[op.groupOf(c.filledBy(rank))];
      const AllToAllvCounts mine = AllToAllvCounts::of(m, W, rank);
      for (int j = 0; j < W; ++j) {
        size_t at = 0;
        for (int k = 0; k < rank; ++k) at += m[size_t(j) * size_t(W) + size_t(k)];
        c.copied(mine.recvOffsets[size_t(j)], in, j, at, mine.recvCounts[size_t(j)]);
      }
      break;
    }
    case OpKind::SendRecv:
      c.copied(0, in, op.recvFrom(rank, W), 0, n);
      break;
    case OpKind::Barrier: case OpKind::Compute: break;
  }
  return c.result;
}

}  // namespace spmd
