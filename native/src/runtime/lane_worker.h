// A thread that runs posted ops in order on the second lane, so a nonblocking collective progresses
// while the first lane runs the ops issued after it. Waiting blocks on a condition variable.
#pragma once
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace spmd {

class LaneWorker {
 public:
  LaneWorker();
  ~LaneWorker();
  LaneWorker(const LaneWorker&) = delete;
  LaneWorker& operator=(const LaneWorker&) = delete;

  // Returns a ticket for wait(). Tickets complete in posting order.
  uint64_t post(std::function<void()> work);
  // Blocks until the ticket's op has run; rethrows what it threw.
  void wait(uint64_t ticket);

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  uint64_t posted_ = 0, finished_ = 0;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace spmd
