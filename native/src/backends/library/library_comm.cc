#include "backends/library/library_comm.h"

#include <sched.h>

#include <algorithm>
#include <thread>

#include "core/error.h"

namespace spmd::library {
namespace {

// Fast completions are caught by a few yields; past them the wait sleeps, doubling up to kMaxSleep,
// so a rank waiting for a slow peer leaves the core to others.
constexpr int kYields = 16;
constexpr auto kFirstSleep = std::chrono::microseconds(8);
constexpr auto kMaxSleep = std::chrono::microseconds(1000);

void pause(int idle) {
  if (idle < kYields) {
    sched_yield();
    return;
  }
  std::this_thread::sleep_for(std::min(kFirstSleep * (1 << std::min(idle - kYields, 16)), kMaxSleep));
}

}  // namespace

Comm::~Comm() {
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
    pause(idle);
  }
}

void Comm::abort(const std::string& reason) {
  if (aborted_) return;
  aborted_ = true;
  const bool aborted = lib_.abort(handle_);
  reason_ = std::string(lib_.name()) + " communicator " + (aborted ? "aborted" : "given up (the library cannot abort)") + ": " + reason;
}

}  // namespace spmd::library
