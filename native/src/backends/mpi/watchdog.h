// Deadlines for MPI's own blocking collectives, the way PyTorch's NCCL watchdog keeps them. A lane runs
// MPI_Allreduce and friends on its own thread, at the library's own speed (coll/tuned, MPICH's CH4
// algorithms; the nonblocking ones progress only while polled and are slower algorithms besides). A thread
// inside a blocking MPI call cannot be woken, so a thread of our own watches: each lane marks the call it
// enters (enter()), and every tick the watchdog answers roll calls, takes abort notices (Faults::aborted)
// and looks at the lanes. When a lane passes its deadline it holds the roll call (RollCall names stopped
// ranks), tells the other ranks, and hands the error to whoever waits for the op (the JS promise of the
// run: onFatal); when a notice comes while a lane is inside a call it hands that on. The call never
// returns, so the job then ends with MPI_Abort: in the runner's exit path once the error is reported, or
// here should that not come.
//
// Where ranks share cores (`napWaits`), MPI's blocking calls still spin (yielding) while they wait, which
// takes the core from the rank they wait for when that one is stopped or slow. So a lane that stays inside
// one call longer than the call should take (10 ms, plus its bytes at 50 MB/s) is made to nap: each tick, the watchdog sends
// the lane's thread a signal whose handler sleeps most of a tick there, inside MPI, and returns to MPI's
// loop, which finds whether the wait is over. A nap is at most an eighth of the wait so far, so a wait that
// ends is prolonged by at most that, and short waits (a collective's rounds) are never touched.
//
// The watchdog calls MPI beside a lane inside MPI, which needs MPI_THREAD_MULTIPLE (checked with Open MPI
// 4.1 and MPICH 4.0). Under MPI_THREAD_FUNNELED it calls no MPI: no roll call, no notices; a deadline still
// ends the job.
#pragma once
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <pthread.h>
#include <string>
#include <thread>

#include "backends/mpi/faults.h"
#include "runtime/backend.h"
#include "runtime/flight_recorder.h"

namespace spmd::mpi {

class Watchdog {
 public:
  using Clock = std::chrono::steady_clock;
  // (code, message) of the error that ends the op in flight; called once, on the watchdog's thread.
  using Handler = std::function<void(const char* code, const std::string& message)>;

  // `mpiFromAnyThread`: MPI_THREAD_MULTIPLE was granted, so the watchdog may call MPI. `napWaits`: ranks
  // share cores, so long waits inside a call nap.
  Watchdog(Faults& faults, int rank, bool mpiFromAnyThread, bool napWaits);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void onFatal(Handler h);

  // A lane's stay inside one blocking MPI call; ends when destroyed.
  class Inside {
   public:
    Inside(Inside&&) = delete;
    ~Inside();

   private:
    friend class Watchdog;
    explicit Inside(std::atomic<uint64_t>& seq) : seq_(seq) {}
    std::atomic<uint64_t>& seq_;
  };
  // On lane `lane`'s thread, right before the blocking call `call` moving `bytes`; `flight` is the lane's
  // recorder (whose current op names the stage).
  [[nodiscard]] Inside enter(int lane, const char* call, size_t bytes, Clock::time_point deadline, const FlightRecorder& flight);

 private:
  // One lane's call, published like a seqlock: `seq` is odd while the lane is inside the call the fields
  // describe, and changes whenever it leaves or enters, so a reader can tell a consistent snapshot. Only the
  // lane's thread writes it: plain release stores, no locked read-modify-write around every MPI call.
  struct Slot {
    std::atomic<uint64_t> seq{0};
    std::atomic<const char*> call{nullptr};
    std::atomic<size_t> bytes{0};
    std::atomic<int64_t> deadlineNs{0};
    std::atomic<const FlightRecorder*> flight{nullptr};
    std::atomic<pthread_t> thread{};       // the lane's thread, to signal a nap to
    std::atomic<int64_t> enteredNs{0};
    std::atomic<uint64_t> napSeq{0};       // the stay (its seq) that the signal in flight asks to nap
    std::atomic<int64_t> napNs{0};
  };
  struct Snapshot {
    bool inside = false;
    const char* call = nullptr;
    size_t bytes = 0;
    int64_t deadlineNs = 0;
    const FlightRecorder* flight = nullptr;
    uint64_t seq = 0;
    int64_t enteredNs = 0;
  };
  Snapshot read(const Slot& s) const;
  // Sends lane `s`'s thread into a nap when its call has outlasted what it should take.
  void napIfStuck(Slot& slot, const Snapshot& s, int64_t now);
  static bool installNapHandler(Watchdog* w);
  static void onNapSignal(int);

  void loop();
  void tick();
  void fire(int lane, const Snapshot& s, bool timedOut);
  [[noreturn]] void lastResort();

  Faults& faults_;
  int rank_;
  bool mpi_;
  bool napWaits_;
  std::array<Slot, kMaxLanes> slots_;
  std::mutex handlerMu_;
  Handler handler_;
  std::string message_;           // the error handed on, for lastResort
  Clock::time_point giveUpAt_{};  // when the watchdog stops waiting for the runner to end the job
  bool fired_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;  // last: started once the fields it uses exist
};

}  // namespace spmd::mpi
