#include "runtime/lane_worker.h"

namespace spmd {

LaneWorker::LaneWorker() : thread_([this] { loop(); }) {}

LaneWorker::~LaneWorker() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

uint64_t LaneWorker::post(std::function<void()> work) {
  std::lock_guard lock(mu_);
  queue_.push_back(std::move(work));
  cv_.notify_all();
  return ++posted_;
}

void LaneWorker::wait(uint64_t ticket) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return finished_ >= ticket || error_; });
  // After a failure the lane's later ops never run: every waiter sees the first error.
  if (error_) std::rethrow_exception(error_);
}

void LaneWorker::loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    auto work = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    std::exception_ptr err;
    try {
      work();
    } catch (...) {
      err = std::current_exception();
    }
    lock.lock();
    if (err && !error_) error_ = err;
    if (!err) ++finished_;
    cv_.notify_all();
  }
}

}  // namespace spmd
