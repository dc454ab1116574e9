// One progress thread per communicator serving a FIFO of ops: issue order is execution order on every
// rank, so collectives always match, and JavaScript never blocks.
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace spmd {

class OpQueue {
 public:
  OpQueue();
  ~OpQueue();  // runs what is queued, then joins
  OpQueue(const OpQueue&) = delete;
  OpQueue& operator=(const OpQueue&) = delete;

  void submit(std::function<void()> op);

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> ops_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace spmd
