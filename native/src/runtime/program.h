// A job graph as native code receives it: tensors to fill, and ops in the schedule order that every rank
// shares. JS plans this once; the step loop, timing and checks all run natively.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/collectives.h"
#include "runtime/backend.h"
#include "base/host_bytes.h"
#include "algorithms/ranks.h"
#include "algorithms/typed_ops.h"
#include "estimating/compressed_allreduce.h"
#include "estimating/estimating_op.h"
#include "estimating/quantized_allreduce.h"
#include "kernels/cpu/fill.h"

namespace spmd {

struct TensorSpec {
  std::string name;
  DType dtype = DType::F32;
  size_t count = 0;
  kernels::Fill fill;
};

// How a reduction travels: exactly; compressed to 1 bit per element with error feedback (an allreduce: the
// compressed_allreduce stage, which always estimates the mean); or quantized to int8/int4 hierarchically
// (the quantized_allreduce stage: a reduce_scatter, or an allreduce when it gathers the blocks back).
enum class Compression : uint8_t { None, OneBit, Quantized };

struct OpSpec {
  std::string stage;
  OpKind kind = OpKind::Barrier;
  Compression compression = Compression::None;  // OneBit: AllReduce; Quantized: AllReduce or ReduceScatter
  OneBitSpec oneBit;                            // OneBit only
  QuantizedSpec quantized;                      // Quantized only
  std::vector<int> inputs;  // tensor indices; several only for a coalesced reduce_scatter
  bool coalesced = false;
  Reduction reduction;
  int root = 0;
  Algo algo = Algo::Auto;
  int shift = 1;
  int peer = -1;  // send_recv: >= 0 exchanges with this rank instead of the shift's (doctor's disjoint pairs)
  double computeUs = 0;
  // The stream's lane: 0 runs in order on the step's thread; another is posted to that lane's worker, runs
  // concurrently with the other lanes, and completes at a waitFor or at the step's end.
  int lane = 0;
  std::vector<int> waitFor;    // indices of earlier ops on other lanes this op must see completed
  // A process group: a partition of the lane's ranks (each group in rank order). The op runs inside the
  // group holding this rank, on a sub-communicator made once per run; empty: the whole lane.
  std::vector<std::vector<int>> groups;
  // nccl-tests' in place: one buffer is the input and the output (reduce_scatter: the output is this rank's
  // block of it; all_gather: the input is this rank's block of it).
  bool inPlace = false;
  // all_to_allv: per group (one without groups) its G×G matrix, row-major: entry (i, j) is what rank i sends j.
  std::vector<std::vector<size_t>> counts;
  double timeoutSec = 300;

  // The index of the group holding lane rank `rank` (0 without groups).
  size_t groupOf(int rank) const {
    for (size_t g = 0; g < groups.size(); ++g) {
      for (int m : groups[g]) if (m == rank) return g;
    }
    return 0;
  }

  // send_recv's partners of rank r of W: its peer both ways, else the ring shift's (wrapped first: no overflow).
  int sendTo(int r, int W) const { return peer >= 0 ? peer : algo::detail::wrapRank(r + algo::detail::wrapRank(shift, W), W); }
  int recvFrom(int r, int W) const { return peer >= 0 ? peer : algo::detail::wrapRank(r - algo::detail::wrapRank(shift, W), W); }
};

struct Program {
  std::vector<TensorSpec> tensors;
  std::vector<OpSpec> ops;
  int warmup = 0;
  int iterations = 1;
  bool check = false;
  double timeoutSec = 300;  // the job's deadline for the untimed step-start barrier
};

// A wrong output element, as the check found it: where it is, where its value came from, what it should be.
constexpr size_t kMaxMismatches = 10;

struct Mismatch {
  uint64_t index = 0;        // in this rank's output
  int tensor = 0;            // the input tensor it came from (program order)
  uint64_t sourceIndex = 0;  // the element of that tensor
  int from = -1;             // the rank whose element it is; -1 for a reduction over every rank
  double expected = 0;
  double found = 0;
};

struct OpResult {
  Algo algorithm = Algo::Auto;
  std::vector<double> timeUs;        // per timed step: this op's own duration on this rank
  std::vector<double> startUs;       // per timed step: when it started, after the step's start
  std::vector<double> overallUs;     // nonblocking: post to completion
  std::vector<double> concurrentUs;  // nonblocking: time other ops ran on lane 0 while it was in flight
  uint64_t wrong = 0;
  uint64_t checked = 0;              // elements compared on this rank
  std::vector<Mismatch> mismatches;  // the first wrong elements (at most kMaxMismatches)
  LinkUsage links;                   // blocking ops on a transport of two kinds: summed over timed steps
  DType outType = DType::F32;
  HostBytes output;                  // this rank's output after the last step
  // Numbers beyond the timings, each a Float64Array property of the JS result (estimating ops: wireBytes,
  // and this rank's partial sums for the error metrics, which JS adds up over ranks).
  NamedSeries series;
  std::vector<NamedBuffer> state;    // op state after the last step (estimating ops: their errors)
};

}  // namespace spmd
