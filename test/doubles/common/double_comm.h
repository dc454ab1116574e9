// The engine of the host-memory ABI doubles (nccl/, hccl/): a communicator over the project's shm
// transport and shared algorithms whose ops run in order on a thread of their own, as a device stream
// runs them beside the host, and the streams the backend polls (spmdDoubleStream*, exported by each
// double). The vendor front ends only translate their ABI to this.
//
// Faults the tests ask for through the environment, for either double:
//   SPMD_DOUBLE_FAIL_INIT=1     joining fails
//   SPMD_DOUBLE_ASYNC_ERROR=1   every op hangs and the async error query reports a remote error
//   SPMD_DOUBLE_STALL_RANK=r    rank r's ops hang until the communicator is aborted
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "backends/shm/segment.h"
#include "backends/shm/shm_transport.h"
#include "core/op_queue.h"
#include "core/transport_collectives.h"

#define SPMD_DOUBLE_EXPORT extern "C" __attribute__((visibility("default")))

namespace spmd::doubles {

struct Stream {
  std::atomic<int> pending{0};
};

class DoubleComm {
 public:
  // A fresh shm name for the root's id.
  static std::string newName();
  // Collective: rank 0 creates the segment `name`, the others attach once it exists; returns once every
  // rank joined, or null on failure (SPMD_DOUBLE_FAIL_INIT, a bad argument, a 30 s wait).
  static std::unique_ptr<DoubleComm> join(const std::string& name, int nranks, int rank);

  DoubleComm(shm::Segment seg, int rank);
  int rank() const { return transport_.rank(); }
  int size() const { return transport_.size(); }
  TransportCollectives& algorithms() { return algorithms_; }
  Transport& transport() { return transport_; }

  // Runs `op` after the ops issued before on this communicator, counting it on `stream` until it ran;
  // false when the stream is null or the communicator was aborted. An op that throws leaves failed() set.
  bool enqueue(void* stream, std::function<void()> op);
  bool failed() const { return failed_; }
  // The fault SPMD_DOUBLE_ASYNC_ERROR asks for: report an async error.
  bool asyncFault() const { return asyncFault_; }
  // Wakes this rank's running op, tells the other ranks, drops queued ops; then delete the communicator.
  void abort();

 private:
  shm::Segment segment_;
  shm::ShmTransport transport_;
  TransportCollectives algorithms_;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> failed_{false};
  bool hang_ = false;
  bool asyncFault_ = false;
  OpQueue worker_;  // last: joined first, while the rest is still alive
};

}  // namespace spmd::doubles
