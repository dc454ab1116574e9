#include "base/lane_worker.h"

namespace spmd {

LaneWorker::~LaneWorker() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
}

uint64_t LaneWorker::post(std::function<void()> work) {
  std::lock_guard lock(mu_);
  queue_.submit([this, work = std::move(work)] {
    {
      std::lock_guard lock(mu_);
      if (error_ || cancelled_) return;
    }
    std::exception_ptr err;
    try {
      work();
    } catch (...) {
      err = std::current_exception();
    }
    std::lock_guard lock(mu_);
    if (err && !error_) error_ = err;
    if (!err) ++finished_;
    cv_.notify_all();
  });
  return ++posted_;
}

void LaneWorker::wait(uint64_t ticket) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return finished_ >= ticket || error_; });
  // After a failure the lane's later ops never run: every waiter sees the first error.
  if (error_) std::rethrow_exception(error_);
}

}  // namespace spmd
