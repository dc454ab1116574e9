#include "backends/library/library_comm.h"

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "backends/library/poll.h"
#include "base/error.h"

namespace spmd::library {

Comm::Comm(Library& lib, Handle handle, Comm* parent) : lib_(lib), handle_(handle), parent_(parent) {
  if (parent_) parent_->children_.push_back(this);
}

Comm::~Comm() {
  if (parent_) std::erase(parent_->children_, this);
  // An aborted communicator was freed by the abort, or (the library cannot abort) is left to the
  // process exit: destroying it could wait forever for work that never completes.
  if (!aborted_) lib_.destroy(handle_);
}

Handle Comm::get() const {
  if (aborted_) throw CommError(code::kAborted, reason_);
  return handle_;
}

void Comm::check(int result, Call c) {
  if (result == 0) return;
  const std::string message = std::string(lib_.name()) + " " + lib_.call(c) + " failed: " + lib_.describe(result);
  abort(message);
  throw CommError(lib_.errorCode(), message);
}

void Comm::wait(Device& device, Clock::time_point deadline, const std::string& what) {
  for (int idle = 0;; ++idle) {
    // Checked before idle(): an op that failed may leave the stream idle with its output unwritten.
    int async = 0;
    if (lib_.asyncError(get(), async) && async != 0) {
      const std::string message =
          std::string(lib_.name()) + " reported an asynchronous error while " + what + ": " + lib_.describe(async);
      abort(message);
      throw CommError(lib_.errorCode(), message);
    }
    if (device.idle()) return;
    if (Clock::now() >= deadline) {
      const std::string message = "deadline passed while " + what;
      abort(message);
      throw CommError(code::kTimeout, message);
    }
    pollPause(idle);
  }
}

Handle Comm::split(int color, int key, Device& device, Clock::time_point deadline) {
  struct Outcome {
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
    int result = 0;
    Handle child = nullptr;
  };
  // Shared with the thread, which may outlive this call (and this communicator) blocked in the library.
  auto outcome = std::make_shared<Outcome>();
  std::thread([outcome, &lib = lib_, &device, parent = get(), color, key] {
    device.select();  // the vendors' device choice is per thread
    Handle child = nullptr;
    const int result = lib.split(parent, color, key, child);
    std::lock_guard<std::mutex> lock(outcome->mutex);
    outcome->done = true;
    outcome->result = result;
    outcome->child = child;
    outcome->cv.notify_one();
  }).detach();
  std::unique_lock<std::mutex> lock(outcome->mutex);
  if (!outcome->cv.wait_until(lock, deadline, [&] { return outcome->done; })) {
    // The caller gathered every rank's color first, so every rank reached the split; the library cannot
    // tell which of them never finished it.
    const std::string message = std::string("deadline passed while waiting for ") + lib_.call(Call::Split) +
                                ", which every rank had reached: a rank stopped or wedged inside it holds it up (" +
                                lib_.name() + " names none)";
    root().endFamily(message, false);
    throw CommError(code::kTimeout, message);
  }
  check(outcome->result, Call::Split);
  return outcome->child;
}

void Comm::abort(const std::string& reason) { root().endFamily(reason, true); }

Comm& Comm::root() { return parent_ ? parent_->root() : *this; }

void Comm::endFamily(const std::string& reason, bool viaLibrary) {
  for (Comm* child : children_) child->endFamily(reason, viaLibrary);
  if (aborted_) return;
  aborted_ = true;
  const bool aborted = viaLibrary && lib_.abort(handle_);
  const char* how = aborted ? "aborted" : viaLibrary ? "given up (the library cannot abort)" : "given up (a call is still inside it)";
  reason_ = std::string(lib_.name()) + " communicator " + how + ": " + reason;
}

}  // namespace spmd::library
