// What ends MPI waits early, for every thread of this process that waits on MPI: an abort notice from
// another rank, an abort or an interrupt here; and what such an ending leaves behind.
//
// MPI has no way to wake a rank blocked in another rank's collective, so an abort is a message: every
// rank keeps one receive posted for it (on a communicator of its own), and every wait polls it.
#pragma once
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "backends/mpi/comm.h"
#include "backends/mpi/roll_call.h"

namespace spmd::mpi {

class Faults {
 public:
  // Collective over `world`; on the MPI thread.
  explicit Faults(MPI_Comm world);
  Faults(const Faults&) = delete;
  Faults& operator=(const Faults&) = delete;

  // True once a notice arrived or abort()/interrupt() ran here. Polls for the notice, and answers roll
  // calls while not aborted; any thread that may call MPI.
  bool aborted();
  // aborted() as last seen, without polling MPI: any thread, and cheap enough for every op's start.
  bool noticed() const { return aborted_.load(std::memory_order_acquire); }
  // Who is where, when a deadline passes (see RollCall).
  RollCall& rollCall() { return roll_; }
  // Who aborted and why, for the CommError every later wait throws.
  std::string reason() const;

  // Tells every other rank, once: not at all when this abort answers another rank's notice. Bounded: a
  // rank that cannot take its notice does not keep this one here.
  void abort(const std::string& why);
  // Any thread, no MPI call (a signal, the process exiting): ends this process's waits; the op that
  // failed then calls abort(), which tells the other ranks.
  void interrupt(const std::string& why);

  // Requests that a failed wait could neither complete nor cancel. MPI_Finalize is erroneous while they
  // are pending, so the runtime ends such a job with MPI_Abort instead.
  void strand(size_t requests) { stranded_ += requests; }
  size_t stranded() const { return stranded_; }

  // A lane will never come back from the MPI call it is in (the watchdog gave up on it): MPI_Finalize cannot
  // run, and the job ends with MPI_Abort. Any thread.
  void wedge() { wedged_.store(true, std::memory_order_release); }
  bool wedged() const { return wedged_.load(std::memory_order_acquire); }

  // On the MPI thread, before MPI_Finalize: withdraws the posted notice receive and the roll call's.
  void close();

 private:
  static constexpr int kTag = 1;
  static constexpr size_t kNoticeBytes = 512;

  void listen();  // posts the receive for a notice
  void noteAbort(std::string reason, bool told);

  Comm comm_;
  RollCall roll_;
  int rank_;
  char inbox_[kNoticeBytes];
  MPI_Request notice_ = MPI_REQUEST_NULL;
  std::vector<char> outbox_;  // must outlive notices still in flight when abort() stops waiting for them
  std::mutex noticeMu_;       // under MPI_THREAD_MULTIPLE both lanes poll; a request is tested by one at a time
  mutable std::mutex mu_;
  std::atomic<bool> aborted_{false};
  bool told_ = false;  // the other ranks know (we told them, or the abort is theirs)
  std::string reason_;
  std::atomic<size_t> stranded_{0};
  std::atomic<bool> wedged_{false};
};

}  // namespace spmd::mpi
