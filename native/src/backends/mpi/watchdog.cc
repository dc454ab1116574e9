#include "backends/mpi/watchdog.h"

#include <cstdio>

#include "backends/mpi/runtime.h"
#include "base/error.h"
#include "runtime/stragglers.h"

namespace spmd::mpi {
namespace {

// How often the watchdog looks: the lateness of a deadline and of a roll call's answer (RollCall waits a
// second for those). A tick preempts a lane polling inside MPI on a shared core for a few microseconds.
constexpr auto kTick = std::chrono::milliseconds(10);
// How long the runner has, after the error is handed on, to report it and end the job itself.
constexpr auto kReportLimit = std::chrono::seconds(15);

int64_t nanosOf(Watchdog::Clock::time_point t) {
  return t == Watchdog::Clock::time_point::max() ? INT64_MAX : nanos(t);
}

}  // namespace

Watchdog::Watchdog(Faults& faults, int rank, bool mpiFromAnyThread)
    : faults_(faults), rank_(rank), mpi_(mpiFromAnyThread), thread_([this] { loop(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::onFatal(Handler h) {
  std::lock_guard lock(handlerMu_);
  handler_ = std::move(h);
}

Watchdog::Inside Watchdog::enter(int lane, const char* call, size_t bytes, Clock::time_point deadline, const FlightRecorder& flight) {
  Slot& s = slots_[size_t(lane)];
  s.call.store(call, std::memory_order_relaxed);
  s.bytes.store(bytes, std::memory_order_relaxed);
  s.deadlineNs.store(nanosOf(deadline), std::memory_order_relaxed);
  s.flight.store(&flight, std::memory_order_relaxed);
  s.seq.fetch_add(1, std::memory_order_release);  // odd: inside
  return Inside(s.seq);
}

Watchdog::Inside::~Inside() { seq_.fetch_add(1, std::memory_order_release); }

Watchdog::Snapshot Watchdog::read(const Slot& s) const {
  const uint64_t before = s.seq.load(std::memory_order_acquire);
  if ((before & 1) == 0) return {};
  Snapshot out{true, s.call.load(std::memory_order_relaxed), s.bytes.load(std::memory_order_relaxed),
               s.deadlineNs.load(std::memory_order_relaxed), s.flight.load(std::memory_order_relaxed)};
  std::atomic_thread_fence(std::memory_order_acquire);
  // The lane left (and maybe entered the next call) while we read: nothing to judge this tick.
  if (s.seq.load(std::memory_order_relaxed) != before) return {};
  return out;
}

void Watchdog::loop() {
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, kTick, [this] { return stop_; })) {
    lock.unlock();
    tick();
    lock.lock();
  }
}

void Watchdog::tick() {
  if (fired_) {
    if (Clock::now() >= giveUpAt_) lastResort();
    return;
  }
  // Polls abort notices and answers roll calls, where MPI may be called from here.
  const bool noticed = mpi_ ? faults_.aborted() : faults_.noticed();
  const int64_t now = steadyNowNs();
  for (int lane = 0; lane < kMaxLanes; ++lane) {
    const Snapshot s = read(slots_[size_t(lane)]);
    if (!s.inside) continue;
    if (now >= s.deadlineNs) return fire(lane, s, true);
    if (noticed) return fire(lane, s, false);
  }
}

void Watchdog::fire(int lane, const Snapshot& s, bool timedOut) {
  std::string reason;
  if (timedOut) {
    reason = std::string("deadline passed while waiting for ") + s.call + " of " + std::to_string(s.bytes) + " bytes";
    if (mpi_) reason += describeStragglers(faults_.rollCall().call(lane), *s.flight);
    // Told first, the other ranks stop waiting too (their watchdogs take the notice).
    if (mpi_) faults_.abort(reason);
  } else {
    reason = faults_.reason();
  }
  // Named as the executor names a failed stage; the runner's own ops ("(step start)") go unnamed, as there.
  const std::string stage = s.flight->stage(s.flight->currentSeq());
  message_ = stage.empty() || stage.front() == '(' ? reason : "stage " + stage + ": " + reason;
  fired_ = true;
  giveUpAt_ = Clock::now() + kReportLimit;
  faults_.wedge();
  std::lock_guard lock(handlerMu_);
  if (handler_) handler_(timedOut ? code::kTimeout : code::kAborted, message_);
}

void Watchdog::lastResort() {
  std::fprintf(stderr, "runner (rank %d): %s (the watchdog ends the job: the runner did not)\n", rank_, message_.c_str());
  std::fflush(stderr);
  Runtime::abortJob(1);
}

}  // namespace spmd::mpi
