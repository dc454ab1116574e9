#include "backends/mpi/watchdog.h"

#include <signal.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
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

// A lane may wait inside one call this long, plus its bytes at kSlowestRate, before it naps: a
// collective's rounds take microseconds, and a large op on a crowded machine still moves at least this.
constexpr int64_t kSpinForNs = 10'000'000;
constexpr double kSlowestRate = 50e6;  // bytes per second
// A nap ends this long before the next tick's signal, so MPI's loop gets to look between naps.
constexpr int64_t kLookNs = 200'000;
// The signal that asks a lane to nap: ignored by default, and neither Node.js nor Open MPI or MPICH handle
// it (a handler found on it at start turns naps off).
constexpr int kNapSignal = SIGURG;
// The watchdog whose lanes nap (one per process: the backend's).
std::atomic<Watchdog*> napping{nullptr};

int64_t nanosOf(Watchdog::Clock::time_point t) {
  return t == Watchdog::Clock::time_point::max() ? INT64_MAX : nanos(t);
}

}  // namespace

Watchdog::Watchdog(Faults& faults, int rank, bool mpiFromAnyThread, bool napWaits)
    : faults_(faults),
      rank_(rank),
      mpi_(mpiFromAnyThread),
      napWaits_(napWaits && installNapHandler(this)),
      thread_([this] { loop(); }) {}

bool Watchdog::installNapHandler(Watchdog* w) {
  struct sigaction old {};
  // Someone else's handler on the signal stays; the lanes then spin as MPI does.
  if (sigaction(kNapSignal, nullptr, &old) != 0 || (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN)) return false;
  struct sigaction nap {};
  nap.sa_handler = &Watchdog::onNapSignal;
  nap.sa_flags = SA_RESTART;
  sigemptyset(&nap.sa_mask);
  napping.store(w, std::memory_order_release);
  return sigaction(kNapSignal, &nap, nullptr) == 0;
}

Watchdog::~Watchdog() {
  // The handler stays (a late signal finds no watchdog and returns); lanes have left their calls by now.
  if (napWaits_) napping.store(nullptr, std::memory_order_release);
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
  // Orders the last call's leaving store before the new fields: a reader that sees a new field then sees
  // seq moved on (its acquire fence pairs with this one).
  std::atomic_thread_fence(std::memory_order_release);
  s.call.store(call, std::memory_order_relaxed);
  s.bytes.store(bytes, std::memory_order_relaxed);
  s.deadlineNs.store(nanosOf(deadline), std::memory_order_relaxed);
  s.flight.store(&flight, std::memory_order_relaxed);
  if (napWaits_) {
    s.thread.store(pthread_self(), std::memory_order_relaxed);
    s.enteredNs.store(steadyNowNs(), std::memory_order_relaxed);
  }
  s.seq.store(s.seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);  // odd: inside
  return Inside(s.seq);
}

Watchdog::Inside::~Inside() { seq_.store(seq_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

Watchdog::Snapshot Watchdog::read(const Slot& s) const {
  const uint64_t before = s.seq.load(std::memory_order_acquire);
  if ((before & 1) == 0) return {};
  Snapshot out{true, s.call.load(std::memory_order_relaxed), s.bytes.load(std::memory_order_relaxed),
               s.deadlineNs.load(std::memory_order_relaxed), s.flight.load(std::memory_order_relaxed),
               before, s.enteredNs.load(std::memory_order_relaxed)};
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
    if (napWaits_) napIfStuck(slots_[size_t(lane)], s, now);
  }
}

void Watchdog::napIfStuck(Slot& slot, const Snapshot& s, int64_t now) {
  const int64_t inside = now - s.enteredNs;
  if (inside < kSpinForNs + int64_t(double(s.bytes) / kSlowestRate * 1e9)) return;
  const int64_t tickNs = std::chrono::duration_cast<std::chrono::nanoseconds>(kTick).count();
  slot.napNs.store(std::min(inside / 8, tickNs - kLookNs), std::memory_order_relaxed);
  slot.napSeq.store(s.seq, std::memory_order_release);
  pthread_kill(slot.thread.load(std::memory_order_relaxed), kNapSignal);
}

// On the lane's thread, which is inside MPI: sleeps if the stay the watchdog judged is still this one (the
// lane cannot leave it while its thread is here). Only async-signal-safe calls.
void Watchdog::onNapSignal(int) {
  Watchdog* w = napping.load(std::memory_order_acquire);
  if (!w) return;
  const int saved = errno;
  for (Slot& s : w->slots_) {
    if (!pthread_equal(s.thread.load(std::memory_order_relaxed), pthread_self())) continue;
    if (s.seq.load(std::memory_order_acquire) != s.napSeq.load(std::memory_order_acquire)) continue;
    const int64_t ns = s.napNs.load(std::memory_order_relaxed);
    timespec t{time_t(ns / 1'000'000'000), long(ns % 1'000'000'000)};
    nanosleep(&t, nullptr);
    break;
  }
  errno = saved;
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
