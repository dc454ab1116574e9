#include "backends/mpi/faults.h"

#include <chrono>
#include <thread>

namespace spmd::mpi {
namespace {

// Notices are small enough to travel eagerly, so their sends normally complete at once.
constexpr auto kNoticeSendLimit = std::chrono::seconds(1);

}  // namespace

Faults::Faults(MPI_Comm world) : comm_(Comm::dup(world)), roll_(world), rank_(comm_.rank()) { listen(); }

void Faults::listen() {
  check(MPI_Irecv(inbox_, int(kNoticeBytes), MPI_CHAR, MPI_ANY_SOURCE, kTag, comm_.get(), &notice_), "MPI_Irecv");
}

void Faults::noteAbort(std::string reason, bool told) {
  std::lock_guard lock(mu_);
  if (reason_.empty()) reason_ = std::move(reason);
  told_ = told_ || told;
  aborted_.store(true, std::memory_order_release);
}

bool Faults::aborted() {
  if (aborted_.load(std::memory_order_acquire)) return true;
  roll_.answer();
  std::unique_lock lock(noticeMu_, std::try_to_lock);
  if (!lock.owns_lock() || notice_ == MPI_REQUEST_NULL) return false;
  int arrived = 0;
  MPI_Status status;
  check(MPI_Test(&notice_, &arrived, &status), "MPI_Test");
  if (!arrived) return false;
  inbox_[kNoticeBytes - 1] = '\0';
  noteAbort("rank " + std::to_string(status.MPI_SOURCE) + " aborted the job: " + inbox_, true);
  return true;
}

std::string Faults::reason() const {
  std::lock_guard lock(mu_);
  return reason_;
}

void Faults::interrupt(const std::string& why) { noteAbort(why, false); }

void Faults::abort(const std::string& why) {
  {
    std::lock_guard lock(mu_);
    if (told_) return;
    told_ = true;
    if (reason_.empty()) reason_ = why;
    aborted_.store(true, std::memory_order_release);
  }
  const int W = comm_.size();
  std::string text = why.substr(0, kNoticeBytes - 1);
  outbox_.assign(text.begin(), text.end());
  outbox_.push_back('\0');
  std::vector<MPI_Request> sends(size_t(W), MPI_REQUEST_NULL);
  for (int peer = 0; peer < W; ++peer) {
    if (peer == rank_) continue;
    check(MPI_Isend(outbox_.data(), int(outbox_.size()), MPI_CHAR, peer, kTag, comm_.get(), &sends[size_t(peer)]),
          "MPI_Isend");
  }
  auto until = std::chrono::steady_clock::now() + kNoticeSendLimit;
  for (;;) {
    int done = 0;
    check(MPI_Testall(W, sends.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall");
    if (done) return;
    if (std::chrono::steady_clock::now() >= until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // A rank that is gone or stuck will never match its notice; MPI may finish the sends on its own time.
  for (MPI_Request& r : sends) if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
}

void Faults::close() {
  std::lock_guard lock(noticeMu_);
  // Ranks that fail together each send a notice: receive every one that came, so none is left unmatched
  // at MPI_Finalize (libraries warn about those).
  if (notice_ == MPI_REQUEST_NULL) listen();  // the notice that aborted this rank took the last one
  for (int arrived = 1; arrived;) {
    check(MPI_Test(&notice_, &arrived, MPI_STATUS_IGNORE), "MPI_Test");
    if (arrived) listen();
  }
  // Cancelling a receive completes locally, so this wait cannot hang.
  MPI_Cancel(&notice_);
  MPI_Wait(&notice_, MPI_STATUS_IGNORE);
  roll_.close();
}

}  // namespace spmd::mpi
