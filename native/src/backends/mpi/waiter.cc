#include "backends/mpi/waiter.h"

#include <sched.h>

#include <algorithm>
#include <thread>

#include "base/error.h"
#include "runtime/stragglers.h"

namespace spmd::mpi {
namespace {

// A few polls in quick succession catch the common case of a fast completion; past them the wait sleeps,
// doubling from kFirstSleep up to kMaxSleep. MPI's nonblocking collectives advance only while their
// ranks poll, so the cap is what each round of a collective may wait for: 8 ranks on 2 cores measured
// 2-4x slower small collectives at a 512 us cap than at 128 us, for the same CPU time.
constexpr int kYields = 64;
constexpr int kOversubscribedYields = 4;
constexpr auto kFirstSleep = std::chrono::microseconds(8);
constexpr auto kMaxSleep = std::chrono::microseconds(128);
// After this many idle polls (some 50 ms) the wait is for a straggler, not for a round of a collective:
// polling every millisecond then costs at most that much latency when it ends, and leaves the core to
// the ranks that work (8 waiting ranks on 2 cores measured 5-7% of a core each at the 128 us cap).
constexpr int kLongWaitPolls = 400;
constexpr auto kLongWaitSleep = std::chrono::milliseconds(1);
// How long requests given up on may take to finish before they are stranded (see Waiter::settle).
constexpr auto kSettleLimit = std::chrono::seconds(3);

}  // namespace

Waiter::Waiter(Faults& faults, bool oversubscribed)
    : faults_(faults), yields_(oversubscribed ? kOversubscribedYields : kYields) {}

bool Waiter::poll(std::span<MPI_Request> reqs, Clock::time_point deadline) { return pollUntil(reqs, deadline, true); }

bool Waiter::pollUntil(std::span<MPI_Request> reqs, Clock::time_point deadline, bool untilAborted) {
  done_.resize(std::max(done_.size(), reqs.size()));
  int idle = 0;
  for (;;) {
    int completed = 0;
    check(MPI_Testsome(int(reqs.size()), reqs.data(), &completed, done_.data(), MPI_STATUSES_IGNORE), "MPI_Testsome");
    if (completed == MPI_UNDEFINED) return true;  // nothing left active
    if (completed > 0) {
      idle = 0;
      continue;
    }
    if ((untilAborted && faults_.aborted()) || Clock::now() >= deadline) return false;
    pause(idle++);
  }
}

void Waiter::pause(int idle) {
  if (idle < yields_) {
    sched_yield();
    return;
  }
  if (idle - yields_ > kLongWaitPolls) {
    std::this_thread::sleep_for(kLongWaitSleep);
    return;
  }
  int doublings = std::min(idle - yields_, 16);
  std::this_thread::sleep_for(std::min(kFirstSleep * (1 << doublings), kMaxSleep));
}

void Waiter::settle(std::span<MPI_Request> reqs, const std::function<bool(size_t)>& cancellable) {
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (reqs[i] == MPI_REQUEST_NULL || !cancellable || !cancellable(i)) continue;
    // A cancelled receive completes locally: this wait cannot hang.
    MPI_Cancel(&reqs[i]);
    MPI_Wait(&reqs[i], MPI_STATUS_IGNORE);
  }
  if (pollUntil(reqs, Clock::now() + kSettleLimit, false)) return;
  size_t stranded = 0;
  for (MPI_Request& r : reqs) {
    if (r == MPI_REQUEST_NULL) continue;
    ++stranded;
    r = MPI_REQUEST_NULL;  // MPI keeps it; dropping the handle keeps it from being counted twice
  }
  faults_.strand(stranded);
}

void Waiter::fail(std::span<MPI_Request> reqs, const std::string& what, const std::function<bool(size_t)>& cancellable) {
  const bool timedOut = !faults_.aborted();
  std::string reason = "deadline passed while " + what;
  if (timedOut && flight_) reason += describeStragglers(faults_.rollCall().call(lane_), *flight_);
  // Told first, the other ranks stop waiting and finish the op they are in, which lets this one's settle.
  if (timedOut) faults_.abort(reason);
  settle(reqs, cancellable);
  if (timedOut) throw CommError(code::kTimeout, reason);
  throw CommError(code::kAborted, faults_.reason());
}

size_t firstPending(std::span<const MPI_Request> reqs) {
  return size_t(std::find_if(reqs.begin(), reqs.end(), [](MPI_Request r) { return r != MPI_REQUEST_NULL; }) - reqs.begin());
}

}  // namespace spmd::mpi
