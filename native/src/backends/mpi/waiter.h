// How a thread waits for MPI requests where no watchdog holds the deadline (the bootstrap's exchanges, the
// named algorithms' point-to-point messages, requests given up on): never inside a blocking MPI call, but
// polling MPI_Testsome, first yielding the core and then sleeping longer and longer. Ranks that share cores
// (8 ranks on 2) leave them to the ranks with work, and the deadline, an abort notice or an interrupt can
// end the wait. The backend's library collectives do not wait here: see watchdog.h.
#pragma once
#include <chrono>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "backends/mpi/faults.h"
#include "runtime/flight_recorder.h"

namespace spmd::mpi {

class Waiter {
 public:
  using Clock = std::chrono::steady_clock;

  // `oversubscribed`: more ranks on this node than cores, so waiting ranks stop yielding sooner.
  Waiter(Faults& faults, bool oversubscribed);
  // The lane this waiter serves and its recorder: a deadline then holds a roll call and names the ranks
  // holding the op up. Without it (the bootstrap's exchanges) a deadline says only what it waited for.
  void watch(int lane, const FlightRecorder* flight) {
    lane_ = lane;
    flight_ = flight;
  }

  // True once every request completed (all are then MPI_REQUEST_NULL); false when the deadline passed
  // or the job was aborted first.
  bool poll(std::span<MPI_Request> reqs, Clock::time_point deadline);

  // Gives up on requests still pending, so their buffers can be freed. MPI may still read or write a
  // pending request's buffer (a peer's single-copy read reaches right into this process), so:
  // receives that `cancellable(i)` allows are cancelled; the rest get a bounded time to finish, which
  // they do when every rank is in the same op (each was told to stop and finishes it too); what is left
  // is stranded with Faults, which then keeps MPI_Finalize from running on it.
  void settle(std::span<MPI_Request> reqs, const std::function<bool(size_t)>& cancellable = {});

  // After poll() returned false: tells the other ranks (on a deadline; an abort was told already),
  // settles the requests and throws kTimeout "deadline passed while <what>[; holding up ...]" or
  // kAborted with the reason.
  [[noreturn]] void fail(std::span<MPI_Request> reqs, const std::string& what,
                         const std::function<bool(size_t)>& cancellable = {});

 private:
  bool pollUntil(std::span<MPI_Request> reqs, Clock::time_point deadline, bool untilAborted);
  void pause(int idle);

  Faults& faults_;
  int yields_;
  int lane_ = -1;
  const FlightRecorder* flight_ = nullptr;
  std::vector<int> done_;  // MPI_Testsome's indices, reused
};

// The index of the first request still pending (reqs.size() if none).
size_t firstPending(std::span<const MPI_Request> reqs);

}  // namespace spmd::mpi
