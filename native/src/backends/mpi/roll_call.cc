#include "backends/mpi/roll_call.h"

#include <chrono>
#include <thread>

namespace spmd::mpi {
namespace {

using Clock = std::chrono::steady_clock;

// Long enough for a rank's watchdog to notice the probe between its ticks (10 ms) even on a busy machine;
// short, since it delays the error of every rank that times out.
constexpr auto kLimit = std::chrono::milliseconds(1000);
constexpr auto kPause = std::chrono::milliseconds(1);
// How long close() lets answers in flight finish (they are small: MPI sends them eagerly).
constexpr auto kCloseLimit = std::chrono::milliseconds(500);

}  // namespace

RollCall::RollCall(MPI_Comm world) : comm_(Comm::dup(world)), rank_(comm_.rank()), size_(comm_.size()) { listen(); }

void RollCall::listen() {
  check(MPI_Irecv(&probeInbox_, 1, MPI_CHAR, MPI_ANY_SOURCE, kProbeTag, comm_.get(), &probe_), "MPI_Irecv");
}

void RollCall::answer() {
  std::unique_lock lock(answerMu_, std::try_to_lock);
  if (lock.owns_lock()) answerLocked();
}

void RollCall::answerLocked() {
  dropFinishedReplies();
  for (;;) {
    if (probe_ == MPI_REQUEST_NULL) return;
    int arrived = 0;
    MPI_Status status;
    check(MPI_Test(&probe_, &arrived, &status), "MPI_Test");
    if (!arrived) return;
    Reply& r = replies_.emplace_back();
    for (int lane = 0; lane < kLanes; ++lane) r.positions[size_t(lane)] = presence_[size_t(lane)].position.load();
    check(MPI_Isend(r.positions.data(), kLanes, MPI_UINT64_T, status.MPI_SOURCE, kAnswerTag, comm_.get(), &r.req), "MPI_Isend");
    listen();
  }
}

void RollCall::dropFinishedReplies() {
  for (auto it = replies_.begin(); it != replies_.end();) {
    int done = 0;
    check(MPI_Test(&it->req, &done, MPI_STATUS_IGNORE), "MPI_Test");
    it = done ? replies_.erase(it) : std::next(it);
  }
}

std::vector<PeerSighting> RollCall::call(int lane) {
  std::lock_guard lock(callMu_);
  if (!called_) {
    called_ = true;
    answers_.assign(size_t(size_), Positions{});
    answered_.assign(size_t(size_), false);
    std::vector<MPI_Request> probes(size_t(size_), MPI_REQUEST_NULL), answers(size_t(size_), MPI_REQUEST_NULL);
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_) continue;
      check(MPI_Irecv(answers_[size_t(peer)].data(), kLanes, MPI_UINT64_T, peer, kAnswerTag, comm_.get(), &answers[size_t(peer)]),
            "MPI_Irecv");
      check(MPI_Isend(&probeOut_, 1, MPI_CHAR, peer, kProbeTag, comm_.get(), &probes[size_t(peer)]), "MPI_Isend");
    }
    const auto until = Clock::now() + kLimit;
    std::vector<int> arrived(size_t(size_), 0);
    for (;;) {
      answer();  // the others ask too, at about the same time: each must answer while it waits
      int count = 0;
      // Testsome, not Testall: Testall leaves every request pending until all are done.
      check(MPI_Testsome(size_, answers.data(), &count, arrived.data(), MPI_STATUSES_IGNORE), "MPI_Testsome");
      if (count == MPI_UNDEFINED || Clock::now() >= until) break;
      if (count == 0) std::this_thread::sleep_for(kPause);
    }
    for (int peer = 0; peer < size_; ++peer) {
      MPI_Request& r = answers[size_t(peer)];
      answered_[size_t(peer)] = r == MPI_REQUEST_NULL;
      if (r == MPI_REQUEST_NULL) continue;
      // A cancelled receive completes locally: this wait cannot hang.
      MPI_Cancel(&r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
    // A silent rank may never take its probe; MPI finishes the send on its own time, or the job ends.
    for (MPI_Request& r : probes) if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
  }
  std::vector<PeerSighting> out;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    out.push_back({peer, answered_[size_t(peer)], answers_[size_t(peer)][size_t(lane)], -1, {}});
  }
  return out;
}

void RollCall::close() {
  std::lock_guard lock(answerMu_);
  // Probes that came late (their sender gave up on the answer) are taken, so none is left unmatched at
  // MPI_Finalize.
  for (int arrived = 1; arrived && probe_ != MPI_REQUEST_NULL;) {
    check(MPI_Test(&probe_, &arrived, MPI_STATUS_IGNORE), "MPI_Test");
    if (arrived) listen();
  }
  if (probe_ != MPI_REQUEST_NULL) {
    MPI_Cancel(&probe_);
    MPI_Wait(&probe_, MPI_STATUS_IGNORE);
  }
  const auto until = Clock::now() + kCloseLimit;
  while (!replies_.empty() && Clock::now() < until) {
    dropFinishedReplies();
    std::this_thread::sleep_for(kPause);
  }
  for (Reply& r : replies_) MPI_Request_free(&r.req);
  // MPI may still send from these buffers (to a rank that stopped taking messages): they stay until the
  // process ends.
  static auto* unfinished = new std::list<Reply>;
  unfinished->splice(unfinished->end(), replies_);
}

}  // namespace spmd::mpi
