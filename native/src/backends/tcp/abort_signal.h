// What ends the waits of every lane of one tcp backend at once: an abort on this rank, or an abort notice
// that a peer sent. Each lane's transport registers the eventfd its epoll_wait watches; raising the signal
// writes to all of them, so a lane blocked on another thread wakes at once instead of at its deadline.
#pragma once
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

namespace spmd::tcp {

class AbortSignal {
 public:
  void watch(int eventFd);
  // The first raise wins and wakes every lane; later ones only return false.
  bool raise(int rank, const std::string& reason);
  bool raised() const { return raised_.load(std::memory_order_acquire); }
  // "rank 3 aborted the job: <reason>", for the CommError every later wait throws.
  std::string describe() const;

 private:
  std::atomic<bool> raised_{false};
  mutable std::mutex mu_;
  int rank_ = -1;
  std::string reason_;
  std::vector<int> eventFds_;
};

// Adds one to an eventfd: whoever waits on it in epoll wakes.
void signalEventFd(int fd);

}  // namespace spmd::tcp
