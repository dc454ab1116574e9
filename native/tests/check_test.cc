// The runner's element-by-element check (runtime/check.h) against outputs built here one element at a time
// from fillValue: a right output has 0 wrong and every element counted; one changed element, at the start,
// across a block boundary or at the end, is found exactly once. Lengths span several of the check's blocks;
// every dtype, and the reductions as sums, max, min and means.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <string>
#include <vector>

#include "runtime/check.h"
#include "harness.h"

namespace {

using namespace spmd;
using spmd::testing::check;

constexpr int W = 3;
// all_to_allv's blocks (rank i sends kCounts[i][j] to j): uneven, a zero row and zeros off it.
const std::vector<size_t> kCounts = {5000, 0, 8000, 0, 0, 0, 4500, 9000, 11};

// Output element k of an all_to_allv on `rank`: the rank it came from and its index there.
std::pair<int, size_t> allToAllvSource(int rank, size_t k) {
  for (int r = 0; r < W; ++r) {
    size_t at = 0;
    for (int j = 0; j < rank; ++j) at += kCounts[size_t(r * W + j)];
    const size_t n = kCounts[size_t(r * W + rank)];
    if (k < n) return {r, at + k};
    k -= n;
  }
  return {-1, 0};
}

// What `rank` must hold after `op` over tensor 0, built element by element.
HostBytes expected(const Program& prog, const OpSpec& op, int rank) {
  const TensorSpec& t = prog.tensors[0];
  const size_t n = t.count, es = elementSize(t.dtype), block = (n + W - 1) / W;
  const auto off = [&](int r) { return std::min(n, size_t(r) * block); };
  const auto len = [&](int r) { return std::min(n, off(r) + block) - off(r); };
  std::vector<double> v;
  const auto value = [&](int r, size_t i) { return kernels::fillValue(t.fill, t.dtype, r, i); };
  const auto sum = [&](size_t i) {
    double s = 0, best = value(0, i);
    for (int r = 0; r < W; ++r) {
      s += value(r, i);
      best = op.reduction.op == RedOp::Max ? std::max(best, value(r, i)) : std::min(best, value(r, i));
    }
    const double want = op.reduction.op == RedOp::Sum ? s : best;
    return op.reduction.mean ? want / W : want;
  };
  switch (op.kind) {
    case OpKind::AllReduce: for (size_t i = 0; i < n; ++i) v.push_back(sum(i)); break;
    case OpKind::ReduceScatter: for (size_t i = 0; i < len(rank); ++i) v.push_back(sum(off(rank) + i)); break;
    case OpKind::AllGather: for (int r = 0; r < W; ++r) for (size_t i = 0; i < n; ++i) v.push_back(value(r, i)); break;
    case OpKind::Broadcast: for (size_t i = 0; i < n; ++i) v.push_back(value(op.root, i)); break;
    case OpKind::Scatter: for (size_t i = 0; i < len(rank); ++i) v.push_back(value(op.root, off(rank) + i)); break;
    case OpKind::AllToAll: for (int r = 0; r < W; ++r) for (size_t i = 0; i < len(rank); ++i) v.push_back(value(r, off(rank) + i)); break;
    case OpKind::SendRecv: for (size_t i = 0; i < n; ++i) v.push_back(value((rank + W - 1) % W, i)); break;
    case OpKind::AllToAllv:
      for (size_t k = 0; allToAllvSource(rank, k).first >= 0; ++k) v.push_back(value(allToAllvSource(rank, k).first, allToAllvSource(rank, k).second));
      break;
    default: break;
  }
  HostBytes out(v.size() * es);
  for (size_t k = 0; k < v.size(); ++k) kernels::storeValue(t.dtype, v[k], out.data() + k * es);
  return out;
}

// Where `out` differs from what checkOutput must find in the element `at` changed: 1 wrong, named.
void checkFindsChange(const Program& prog, const OpSpec& op, int rank, const HostBytes& out, size_t at, const std::string& what) {
  const DType dt = prog.tensors[0].dtype;
  const size_t es = elementSize(dt);
  HostBytes bad = out;
  bad[at * es + es - 1] ^= 0x40;  // the top byte: a change far beyond any rounding tolerance (or a NaN)
  CheckResult r = checkOutput(prog, op, rank, W, bad);
  check(r.wrong == 1 && r.mismatches.size() == 1, what + ": element " + std::to_string(at) + " changed, " + std::to_string(r.wrong) + " wrong");
  if (r.mismatches.size() != 1) return;
  const Mismatch& m = r.mismatches[0];
  const double expected = kernels::loadValue(dt, out.data() + at * es), found = kernels::loadValue(dt, bad.data() + at * es);
  const bool reduced = op.kind == OpKind::AllReduce || op.kind == OpKind::ReduceScatter;
  // A reduction's mean is the one value the output rounds: the mismatch has it before rounding.
  const bool close = op.reduction.mean ? std::fabs(m.expected - expected) <= 1e-2 * std::fabs(expected) : m.expected == expected;
  check(m.index == at && close && (m.found == found || (std::isnan(m.found) && std::isnan(found))) && (m.from == -1) == reduced,
        what + ": element " + std::to_string(at) + " named with expected " + std::to_string(m.expected) + " found " + std::to_string(m.found));
  if (op.kind != OpKind::AllToAllv) return;
  // The mismatch names the rank the element came from and its index in that rank's input.
  const auto [from, index] = allToAllvSource(rank, at);
  check(m.from == from && m.sourceIndex == index, what + ": element " + std::to_string(at) + " named as from rank " + std::to_string(from) + " index " + std::to_string(index));
}

void testFindsEachWrongElement() {
  for (DType dt : kDTypes) {
    for (OpKind kind : {OpKind::AllReduce, OpKind::ReduceScatter, OpKind::AllGather, OpKind::Broadcast, OpKind::Scatter,
                        OpKind::AllToAll, OpKind::AllToAllv, OpKind::SendRecv}) {
      const bool reduces = kind == OpKind::AllReduce || kind == OpKind::ReduceScatter;
      std::vector<Reduction> reductions = {{RedOp::Sum, false}};
      if (reduces) reductions.insert(reductions.end(), {{RedOp::Max, false}, {RedOp::Min, false}});
      if (reduces && isFloat(dt)) reductions.push_back({RedOp::Sum, true});
      for (Reduction reduction : reductions) {
        Program prog;
        prog.tensors.push_back({"t", dt, 20011, kernels::Fill{kernels::Fill::Kind::Integers, 5, -9, 9}});
        OpSpec op;
        op.stage = "s";
        op.kind = kind;
        op.inputs = {0};
        op.root = 2;
        op.counts = {kCounts};
        op.reduction = reduction;
        for (int rank = 0; rank < W; ++rank) {
          const std::string what = std::string(opKindName(kind)) + " " + std::string(dtypeName(dt)) + " reduction " +
                                   std::to_string(int(reduction.op)) + (reduction.mean ? " mean" : "") + " rank " + std::to_string(rank);
          HostBytes out = expected(prog, op, rank);
          const size_t n = out.size() / elementSize(dt);
          CheckResult ok = checkOutput(prog, op, rank, W, out);
          check(ok.wrong == 0 && ok.checked == n, what + ": right output: " + std::to_string(ok.wrong) + " wrong of " + std::to_string(ok.checked));
          for (size_t at : {size_t(0), size_t(4095), size_t(4096), n - 1}) checkFindsChange(prog, op, rank, out, at, what);
        }
      }
    }
  }
}

}  // namespace

int main() { return spmd::testing::runTests({{"finds each wrong element", testFindsEachWrongElement}}); }
