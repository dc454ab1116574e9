#include "backends/shm/core_probe.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <thread>

#include "backends/shm/segment.h"
#include "base/cores.h"

namespace spmd::shm {
namespace {

using Clock = std::chrono::steady_clock;

// Best of kChunks chunks of kTrips round trips each: a chunk the scheduler or an interrupt hit does not decide,
// and all of them take under a millisecond a pair at 300 ns.
constexpr int kChunks = 8;
constexpr int kTrips = 256;
// A pair whose round trips take this long in all has a rank kept off its CPU (a busy machine): it gives up rather
// than time that, and start-up stays short.
constexpr auto kPairGiveUp = std::chrono::milliseconds(50);
// Rank 0's two threads get longer: where the ranks share CPUs, start-up takes a second anyway, and under 4 busy
// processes on 2 CPUs 50 ms timed 4 of 10 launches at W=3, 200 ms 9 of 10.
constexpr auto kThreadsGiveUp = std::chrono::milliseconds(200);
constexpr double kNever = std::numeric_limits<double>::infinity();

// Spins until `line` holds `want`; false once `until` has passed.
bool await(const std::atomic<uint64_t>& line, uint64_t want, Clock::time_point until) {
  for (uint32_t i = 1;; ++i) {
    if (line.load(std::memory_order_acquire) == want) return true;
    if (i % 1024 == 0 && Clock::now() > until) return false;
  }
}

// This rank's side of a pair's round trips from `base` (rank 0 `asks`, its partner answers): ns per round trip
// in the best chunk, kNever where a wait gave up after `giveUp` in all.
double roundTrips(std::atomic<uint64_t>& line, uint64_t base, bool asks, Clock::duration giveUp) {
  const Clock::time_point until = Clock::now() + giveUp;
  double best = kNever;
  uint64_t v = base;
  for (int chunk = 0; chunk < kChunks; ++chunk) {
    const Clock::time_point t0 = Clock::now();
    for (int i = 0; i < kTrips; ++i, v += 2) {
      if (asks) line.store(v + 1, std::memory_order_release);
      if (!await(line, asks ? v + 2 : v + 1, until)) return kNever;
      if (!asks) line.store(v + 2, std::memory_order_release);
    }
    best = std::min(best, std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / kTrips);
  }
  return best;
}

// Round trips between two threads of this process, pinned to the first two CPUs it may run on; kNever where it
// may run on one. Neither waits for a rank off its CPU, and the calling thread's binding stays as it was.
double threadRoundTrips() {
  if (usableCores() < 2) return kNever;
  struct alignas(kCacheLine) Line {
    std::atomic<uint64_t> v{0};
  } line;
  double ns = kNever;
  std::thread asker([&] {
    pinThisThread(0);
    ns = roundTrips(line.v, 0, true, kThreadsGiveUp);
  });
  std::thread answerer([&] {
    pinThisThread(1);
    roundTrips(line.v, 0, false, kThreadsGiveUp);
  });
  asker.join();
  answerer.join();
  return ns;
}

}  // namespace

std::vector<double> timeCoreRoundTrips(SharedCollectives& c, std::atomic<uint64_t>& line, bool sharesCores) {
  const int W = c.size(), me = c.rank();
  if (W < 2) return {};
  // Each rank knows its own binding only: the ranks decide together whether any of them shares.
  double shares = sharesCores || unsigned(W) > onlineCores() ? 1 : 0;
  c.allreduce(&shares, &shares, 1, DType::F64, RedOp::Max, Algo::Shared);
  if (shares > 0) {
    double ns = me == 0 ? threadRoundTrips() : 0;
    c.allreduce(&ns, &ns, 1, DType::F64, RedOp::Max, Algo::Shared);
    return ns == kNever ? std::vector<double>{} : std::vector<double>{ns};
  }
  // Pair r's values start at r << 40, above any an earlier pair left on the line, which would otherwise answer
  // the new pair's first wait.
  std::vector<double> ns(size_t(W - 1), 0);
  for (int r = 1; r < W; ++r) {
    c.barrier(Algo::Auto);
    if (me == 0 || me == r) ns[size_t(r - 1)] = roundTrips(line, uint64_t(r) << 40, me == 0, kPairGiveUp);
  }
  c.allreduce(ns.data(), ns.data(), ns.size(), DType::F64, RedOp::Max, Algo::Shared);
  if (std::any_of(ns.begin(), ns.end(), [](double t) { return t == kNever; })) return {};
  return ns;
}

}  // namespace spmd::shm
