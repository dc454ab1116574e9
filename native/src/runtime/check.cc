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
  std::vector<double> values = std::vector<double>(kBlock);  // one rank's block of a reduction's inputs
  // A reduction's columns so far (a column: one element over the ranks folded in): for a sum, the sum and
  // the sum of magnitudes (its rounding bound); for max or min, the extreme.
  std::vector<double> sum = std::vector<double>(kBlock), absSum = std::vector<double>(kBlock), best = std::vector<double>(kBlock);
  std::vector<uint64_t> wrapped = std::vector<uint64_t>(kBlock);  // integer sums wrap, as the kernels' do
  std::vector<int64_t> extreme = std::vector<int64_t>(kBlock);

  const kernels::Fill& fill(int tensor) const { return program.tensors[size_t(tensor)].fill; }
  // The rank whose fill made group rank r's input.
  int filledBy(int r) const { return members.empty() ? r : members[size_t(r)]; }

  void wrongAt(Mismatch m) {
    ++result.wrong;
    if (result.mismatches.size() < kMaxMismatches) result.mismatches.push_back(m);
  }

  // Output elements [k, k + len) must equal elements [index, index + len) of `rank`'s tensor `tensor`, bit
  // for bit. A block is compared whole first: element by element only where it differs.
  void copied(size_t k, int tensor, int rank, size_t index, size_t len) {
    for (size_t at = 0; at < len; at += kBlock) {
      const size_t m = std::min(kBlock, len - at);
      kernels::fillBuffer(fill(tensor), dt, filledBy(rank), want.data(), m, index + at);
      const uint8_t* got = out + (k + at) * es;
      result.checked += m;
      if (std::memcmp(got, want.data(), m * es) == 0) continue;
      for (size_t i = 0; i < m; ++i) {
        if (std::memcmp(got + i * es, want.data() + i * es, es) == 0) continue;
        wrongAt({k + at + i, tensor, index + at + i, filledBy(rank), kernels::loadValue(dt, want.data() + i * es), kernels::loadValue(dt, got + i * es)});
      }
    }
  }

  // Output elements [k, k + len) must be the reduction over all ranks of elements [index, index + len) of
  // tensor `tensor`: each rank's block of values is folded into the columns' sums in turn (rank order, as
  // the reference sums), then the block's outputs are compared, read with one dtype switch a block.
  void reduced(size_t k, int tensor, size_t index, size_t len) {
    const bool floats = isFloat(dt);
    for (size_t at = 0; at < len; at += kBlock) {
      const size_t m = std::min(kBlock, len - at);
      for (int r = 0; r < worldSize; ++r) {
        kernels::fillValues(fill(tensor), dt, filledBy(r), index + at, m, values.data());
        floats ? foldFloats(r == 0, m) : foldIntegers(r == 0, m);
      }
      const uint8_t* got = out + (k + at) * es;
      const auto wrongIf = [&](size_t i, bool right, double want) {
        if (!right) wrongAt({k + at + i, tensor, index + at + i, -1, want, kernels::loadValue(dt, got + i * es)});
      };
      if (floats) {
        kernels::forEachValue(dt, got, 0, m, [&](size_t i, double have) {
          const double want = floatWant(i);
          wrongIf(i, withinRounding(i, have, want), want);
        });
      } else {
        for (size_t i = 0; i < m; ++i) {
          const int64_t want = integerWant(i);
          wrongIf(i, integerHave(got + i * es) == want, double(want));
        }
      }
      result.checked += m;
    }
  }

  void foldFloats(bool first, size_t m) {
    const RedOp rop = op.reduction.op;
    for (size_t i = 0; i < m; ++i) {
      const double v = values[i];
      if (rop == RedOp::Sum) {
        sum[i] = (first ? 0.0 : sum[i]) + v;
        absSum[i] = (first ? 0.0 : absSum[i]) + std::fabs(v);
      } else {
        best[i] = first ? v : rop == RedOp::Max ? std::max(best[i], v) : std::min(best[i], v);
      }
    }
  }

  void foldIntegers(bool first, size_t m) {
    const RedOp rop = op.reduction.op;
    for (size_t i = 0; i < m; ++i) {
      const auto v = int64_t(values[i]);
      if (rop == RedOp::Sum) {
        wrapped[i] = (first ? 0 : wrapped[i]) + uint64_t(v);
      } else {
        extreme[i] = first ? v : rop == RedOp::Max ? std::max(extreme[i], v) : std::min(extreme[i], v);
      }
    }
  }

  int64_t integerWant(size_t i) const {
    const int64_t want = op.reduction.op == RedOp::Sum ? int64_t(wrapped[i]) : extreme[i];
    return dt == DType::I32 ? int32_t(uint32_t(uint64_t(want))) : want;
  }
  int64_t integerHave(const uint8_t* p) const {
    return dt == DType::I64 ? *reinterpret_cast<const int64_t*>(p) : int64_t(kernels::loadValue(dt, p));
  }

  double floatWant(size_t i) const {
    const double want = op.reduction.op == RedOp::Sum ? sum[i] : best[i];
    return op.reduction.mean ? want / worldSize : want;
  }
  // Whether `have` is column i's reduction, `want`, within the rounding that ring and tree orders may differ by.
  bool withinRounding(size_t i, double have, double want) const {
    double tol = op.reduction.op == RedOp::Sum ? 2.0 * worldSize * accumulationEps(dt) * absSum[i] : 0.0;
    if (op.reduction.mean) tol /= worldSize;
    return std::fabs(have - want) <= tol + storageEps(dt) * std::fabs(want);
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
