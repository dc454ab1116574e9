// Work run in order on an OpQueue's thread: the second lane's ops, so a nonblocking collective progresses
// while the first lane runs the ops issued after it, and an estimating op's computations on pieces while its
// lane moves others (estimating/quantized_allreduce.cc). Adds what both need on top of the queue: a ticket
// per op to wait for, and the first error, after which the later ops never run.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>

#include "base/op_queue.h"

namespace spmd {

class LaneWorker {
 public:
  LaneWorker() = default;
  ~LaneWorker();  // ops not yet started never run
  LaneWorker(const LaneWorker&) = delete;
  LaneWorker& operator=(const LaneWorker&) = delete;

  // Returns a ticket for wait(). Tickets complete in posting order.
  uint64_t post(std::function<void()> work);
  // Blocks until the ticket's op has run; rethrows what it threw.
  void wait(uint64_t ticket);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t posted_ = 0, finished_ = 0;
  std::exception_ptr error_;
  bool cancelled_ = false;
  OpQueue queue_;  // last: joined first, while the fields its ops use still exist
};

}  // namespace spmd
