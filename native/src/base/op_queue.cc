#include "base/op_queue.h"

namespace spmd {

OpQueue::OpQueue() : thread_([this] { loop(); }) {}

OpQueue::~OpQueue() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void OpQueue::submit(std::function<void()> op) {
  {
    std::lock_guard lock(mu_);
    ops_.push_back(std::move(op));
  }
  cv_.notify_all();
}

void OpQueue::loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !ops_.empty(); });
    if (ops_.empty()) return;
    auto op = std::move(ops_.front());
    ops_.pop_front();
    lock.unlock();
    op();  // ops report their own errors through their completion
    lock.lock();
  }
}

}  // namespace spmd
