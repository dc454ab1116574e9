#include "backends/library/library_comm.h"

#include <algorithm>

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

void Comm::abort(const std::string& reason) {
  if (parent_) return parent_->abort(reason);
  abortFamily(reason);
}

void Comm::abortFamily(const std::string& reason) {
  for (Comm* child : children_) child->abortFamily(reason);
  if (aborted_) return;
  aborted_ = true;
  const bool aborted = lib_.abort(handle_);
  reason_ = std::string(lib_.name()) + " communicator " + (aborted ? "aborted" : "given up (the library cannot abort)") + ": " + reason;
}

}  // namespace spmd::library
