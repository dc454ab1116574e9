#include "backends/tcp/abort_signal.h"

#include <unistd.h>

#include <cstdint>

namespace spmd::tcp {

void signalEventFd(int fd) {
  uint64_t one = 1;
  // Fails only when the counter is about to overflow, and then the fd is readable anyway.
  [[maybe_unused]] ssize_t n = write(fd, &one, sizeof one);
}

void AbortSignal::watch(int eventFd) {
  std::lock_guard lock(mu_);
  eventFds_.push_back(eventFd);
}

bool AbortSignal::raise(int rank, const std::string& reason) {
  std::lock_guard lock(mu_);
  if (raised_.load(std::memory_order_relaxed)) return false;
  rank_ = rank;
  reason_ = reason;
  raised_.store(true, std::memory_order_release);
  for (int fd : eventFds_) signalEventFd(fd);
  return true;
}

std::string AbortSignal::describe() const {
  std::lock_guard lock(mu_);
  return "rank " + std::to_string(rank_) + " aborted the job: " + reason_;
}

}  // namespace spmd::tcp
