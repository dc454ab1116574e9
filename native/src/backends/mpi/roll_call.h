// Who is where, asked over MPI when a deadline passes. MPI cannot say which rank is missing from a
// collective, so the rank whose deadline passed asks every other rank for its place in the op sequence
// (a probe on a communicator of its own) and waits a bounded time for the answers. Ranks answer from the
// watchdog's thread (and from the waits of the bootstrap), so a rank that is stopped does not answer: that
// silence is the finding.
#pragma once
#include <array>
#include <list>
#include <mutex>
#include <vector>

#include "backends/mpi/comm.h"
#include "runtime/backend.h"
#include "runtime/stragglers.h"

namespace spmd::mpi {

class RollCall {
 public:
  static constexpr int kLanes = kMaxLanes;  // every lane the backend may make

  // Collective over `world`; on the MPI thread.
  explicit RollCall(MPI_Comm world);
  RollCall(const RollCall&) = delete;
  RollCall& operator=(const RollCall&) = delete;

  // This process's place in each lane's op sequence; the lanes' flight recorders mirror into it.
  Presence& presence(int lane) { return presence_[size_t(lane)]; }

  // Answers the probes that arrived. Every wait calls it while it polls; a call that finds another
  // thread answering returns at once.
  void answer();

  // Probes every other rank and waits at most kLimit for the answers; what each answered about `lane`
  // (answered=false for the silent). Once per process: a second call (the other lane's deadline) gets
  // the first call's sightings.
  std::vector<PeerSighting> call(int lane);

  // On the MPI thread, before MPI_Finalize: withdraws the posted probe receive and lets answers in
  // flight finish (bounded).
  void close();

 private:
  static constexpr int kProbeTag = 2, kAnswerTag = 3;
  using Positions = std::array<uint64_t, kLanes>;
  struct Reply {
    MPI_Request req = MPI_REQUEST_NULL;
    Positions positions{};  // the buffer MPI sends from until req completes
  };

  void listen();
  void answerLocked();
  void dropFinishedReplies();

  Comm comm_;
  int rank_, size_;
  std::array<Presence, kLanes> presence_;
  char probeInbox_ = 0;
  char probeOut_ = 0;  // what a probe sends: MPI may still read it after call() returns
  MPI_Request probe_ = MPI_REQUEST_NULL;
  std::list<Reply> replies_;  // a list: a Reply's buffer must not move while MPI sends it
  std::mutex answerMu_;
  std::mutex callMu_;
  bool called_ = false;
  std::vector<Positions> answers_;  // per rank, from the one call
  std::vector<bool> answered_;
};

}  // namespace spmd::mpi
