#include "backends/nccl/nccl_comm.h"

#include <sched.h>

#include <algorithm>
#include <thread>

#include "backends/nccl/nccl_error.h"
#include "core/error.h"

namespace spmd::nccl {
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

Comm::Comm(const Api& api, const ncclUniqueId& id, int rank, int size) : api_(api) {
  nccl::check(api_, api_.commInitRank(&comm_, size, id, rank), "ncclCommInitRank");
}

Comm::~Comm() {
  if (!aborted_ && comm_) api_.commDestroy(comm_);
}

ncclComm_t Comm::get() const {
  if (aborted_) throw CommError(code::kAborted, reason_);
  return comm_;
}

void Comm::check(ncclResult_t r, const char* call) {
  if (r == ncclSuccess) return;
  const std::string message = std::string("NCCL ") + call + " failed: " + describe(api_, r);
  abort(message);  // a failed issue may leave other ranks inside the collective
  throw CommError(code::kNccl, message);
}

void Comm::wait(Device& device, Clock::time_point deadline, const std::string& what) {
  for (int idle = 0;; ++idle) {
    // Checked before idle(): an op that failed may leave the stream idle with its output unwritten.
    ncclResult_t async = ncclSuccess;
    if (api_.commGetAsyncError) nccl::check(api_, api_.commGetAsyncError(get(), &async), "ncclCommGetAsyncError");
    if (async != ncclSuccess && async != ncclInProgress) {
      const std::string message = "NCCL reported an asynchronous error while " + what + ": " + describe(api_, async);
      abort(message);
      throw CommError(code::kNccl, message);
    }
    if (device.idle()) return;
    if (Clock::now() >= deadline) {
      const std::string message = "deadline passed while " + what;
      abort(message + (api_.commAbort ? " (NCCL communicator aborted)" : ""));
      throw CommError(code::kTimeout, message);
    }
    pause(idle);
  }
}

void Comm::abort(const std::string& reason) {
  if (aborted_) return;
  aborted_ = true;
  reason_ = "NCCL communicator aborted: " + reason;
  // Without ncclCommAbort the communicator cannot be ended safely while work may be pending on it: it is
  // left to the process exit.
  if (api_.commAbort) api_.commAbort(comm_);
}

}  // namespace spmd::nccl
