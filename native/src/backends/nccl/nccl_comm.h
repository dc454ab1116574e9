// One NCCL communicator and the wait for the work issued on it: the stream is polled, yielding the core
// and then sleeping longer and longer (ranks may share few cores), while ncclCommGetAsyncError is checked
// for errors NCCL found meanwhile; at the deadline, or on such an error, the communicator is aborted
// (ncclCommAbort), which is what makes NCCL's kernels give up, and every later op fails fast.
#pragma once
#include <chrono>
#include <string>

#include "backends/nccl/device.h"
#include "backends/nccl/nccl_api.h"

namespace spmd::nccl {

class Comm {
 public:
  using Clock = std::chrono::steady_clock;
  // Collective: blocks in ncclCommInitRank until every rank joined.
  Comm(const Api& api, const ncclUniqueId& id, int rank, int size);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  const Api& api() const { return api_; }
  // Throws kAborted (with the reason) once the communicator was aborted.
  ncclComm_t get() const;
  // Checks the result of issuing a call on the communicator.
  void check(ncclResult_t r, const char* call);
  // Returns once `device`'s stream is idle; throws kTimeout, kNccl (async error) or kAborted.
  void wait(Device& device, Clock::time_point deadline, const std::string& what);
  // ncclCommAbort (where the library has it); later ops throw kAborted naming `reason`.
  void abort(const std::string& reason);

 private:
  const Api& api_;
  ncclComm_t comm_ = nullptr;
  bool aborted_ = false;
  std::string reason_;
};

}  // namespace spmd::nccl
