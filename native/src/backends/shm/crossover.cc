#include "backends/shm/crossover.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <vector>

#include "base/cores.h"

namespace spmd::shm {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kSizes = std::size(kTimedSizes), kReduceSizes = std::size(kReduceTimedSizes);
// Each rank's best of this many rounds: a round the scheduler or an interrupt hit does not decide.
constexpr int kRounds = 4;
// Within a round each path runs an op this many times in a row before its calls count, and then kCounted times:
// a job repeats an op on buffers the op alone touches, and that is what the start-up must time. Where the cores
// share no cache, a single-copy pull of a 16 KiB block that a rank pulled before hits its own cache (3.8 us a call
// in a job), but one after the other path, or after another op wrote its source, waits on the peer's cache as long
// as staging does (8.6): timed one call at a time, the two tied and the start-up chose either in about half the
// launches (docs/PERFORMANCE.md, "The start-up times what a job repeats").
constexpr int kSettling = 1, kCounted = 2;
// The allreduces' rounds. Where the cores share no cache, a pulled allreduce of 1 MiB took 4-6 calls after start-up
// to reach its steady 113 us (145-450 us before), while the staged one is slow throughout (240-480 us): best of 4,
// the start-up chose staged in 10 of 64 such launches under load, which then ran 3-4x slower; with 4 or more calls
// before the best of 4 counted, or best of 8, in none of 58 (docs/PERFORMANCE.md, "The start-up's reductions").
// It costs about 1 ms more where the cores share a cache, 3 where they do not.
constexpr int kReduceRounds = 8;

// Seconds `op` takes on this rank, the ranks starting it together.
template <class Op>
double timed(SharedCollectives& c, Op op) {
  c.barrier(Algo::Auto);
  const Clock::time_point t0 = Clock::now();
  op();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Why the ranks keep the defaults, "" where they time. The rank count and the host's CPUs are every rank's alike;
// where they would time, one rank's `timedCopyPath` decides all (an allreduce, so none times alone).
std::string untimed(SharedCollectives& c, bool timedCopyPath) {
  const int W = c.size();
  if (W < 2) return "not timed: one rank";
  if (W > kTimedRanksAtMost) return "not timed above " + std::to_string(kTimedRanksAtMost) + " ranks";
  if (unsigned(W) > onlineCores()) return "not timed: " + std::to_string(W) + " ranks on " + std::to_string(onlineCores()) + " CPUs";
  double told = timedCopyPath ? 0 : 1;
  c.allreduce(&told, &told, 1, DType::F64, RedOp::Max, Algo::Shared);
  return told > 0 ? "not timed: SPMD_SHM_SINGLE_COPY=fixed" : "";
}

}  // namespace

size_t crossover(std::span<const size_t> sizes, const double* staged, const double* single, size_t otherwise, double margin) {
  double all = 0;
  for (size_t s = 0; s < sizes.size(); ++s) all += staged[s];
  double best = all * (1 - margin);
  size_t from = otherwise;
  for (size_t i = sizes.size(); i-- > 0;) {
    double total = 0;
    for (size_t s = 0; s < sizes.size(); ++s) total += s < i ? staged[s] : single[s];
    if (total < best) best = total, from = sizes[i];
  }
  return from;
}

SingleCopyFrom timeSingleCopy(SharedCollectives& c, bool timedCopyPath) {
  const int W = c.size();
  const bool fanOut = W <= kSingleCopyFanOutRanks;
  const std::string staysStaged = fanOut ? "" : "; broadcast and all_gather stage at W > " + std::to_string(kSingleCopyFanOutRanks);
  const std::string why = untimed(c, timedCopyPath);
  if (!why.empty()) return {kSingleCopyFromBytes, fanOut ? kSingleCopyBroadcastFromBytes : SIZE_MAX, why + staysStaged};
  // Seconds per [path: staged, single copy][op: all_to_all, broadcast][timed size], then per [path][reduce timed
  // size] the allreduces where the ranks may pull reductions.
  const bool reduces = W == kSingleCopyReduceRanks;
  const size_t reduced = 2 * 2 * kSizes;
  std::vector<double> t(reduced + 2 * kReduceSizes, std::numeric_limits<double>::infinity());
  const auto at = [](int path, int op, size_t s) { return (size_t(path) * 2 + size_t(op)) * kSizes + s; };
  const auto allreduceAt = [reduced](int path, size_t s) { return reduced + size_t(path) * kReduceSizes + s; };
  // The broadcast has a buffer of its own: in a job no other op writes an op's source between its calls.
  std::vector<char> in(size_t(W) * kTimedSizes[kSizes - 1], 1), out(in.size()), sent(kTimedSizes[kSizes - 1], 1);
  std::vector<float> x(reduces ? kReduceTimedSizes[kReduceSizes - 1] / sizeof(float) : 0, 1.0f), sum(x.size());
  // Both paths in this round, which goes first alternating: neither always finds the other's leftovers.
  const auto bothPaths = [&c](int round, auto time) {
    for (int k = 0; k < 2; ++k) {
      const int path = (k + round) % 2;
      c.useSingleCopy(path ? SingleCopyFrom{0, 0, "", 0} : SingleCopyFrom{});
      time(path);
    }
  };
  const auto best = [&c](double& t, auto op) { t = std::min(t, timed(c, op)); };
  const auto settled = [&c, &best](double& t, auto op) {
    for (int k = 0; k < kSettling; ++k) timed(c, op);
    for (int k = 0; k < kCounted; ++k) best(t, op);
  };
  for (int round = 0; round < kRounds; ++round) {
    for (size_t s = 0; s < kSizes; ++s) {
      const size_t n = kTimedSizes[s];
      bothPaths(round, [&](int path) {
        settled(t[at(path, 0, s)], [&] { c.allToAll(in.data(), out.data(), size_t(W) * n, 1, Algo::Shared); });
        if (fanOut) settled(t[at(path, 1, s)], [&] { c.broadcast(sent.data(), n, 0, Algo::Shared); });
      });
    }
  }
  for (int round = 0; reduces && round < kReduceRounds; ++round) {
    for (size_t s = 0; s < kReduceSizes; ++s) {
      bothPaths(round, [&](int path) {
        best(t[allreduceAt(path, s)], [&] { c.allreduce(x.data(), sum.data(), kReduceTimedSizes[s] / sizeof(float), DType::F32, RedOp::Sum, Algo::Shared); });
      });
    }
  }
  c.useSingleCopy({});
  c.allreduce(t.data(), t.data(), t.size(), DType::F64, RedOp::Max, Algo::Shared);
  const std::string how = "timed " + std::to_string(kTimedSizes[0] >> 10) + "-" + std::to_string(kTimedSizes[kSizes - 1] >> 10) + " KiB at start-up";
  return {crossover(kTimedSizes, &t[at(0, 0, 0)], &t[at(1, 0, 0)], kSingleCopyFromBytes, kSwitchMargin),
          fanOut ? crossover(kTimedSizes, &t[at(0, 1, 0)], &t[at(1, 1, 0)], kSingleCopyBroadcastFromBytes, kBroadcastSwitchMargin) : SIZE_MAX,
          how + staysStaged, reduces ? crossover(kReduceTimedSizes, &t[allreduceAt(0, 0)], &t[allreduceAt(1, 0)], SIZE_MAX, kSwitchMargin) : SIZE_MAX};
}

}  // namespace spmd::shm
