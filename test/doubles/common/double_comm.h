// The engine of the host-memory ABI doubles of the collective libraries (nccl/, hccl/): a communicator over
// the project's shm transport and shared algorithms whose ops run in order on a thread of their own, as a
// device stream runs them beside the host, counted on the device doubles' streams (common/stream.h). A split
// of it (ncclCommSplit) moves data on the same transport through a GroupTransport, and queues its ops on the
// same thread, so the ops of a communicator and its splits run in issue order. The vendor front ends only
// translate their ABI to this.
//
// Faults the tests ask for through the environment, for either double:
//   SPMD_DOUBLE_FAIL_INIT=1         joining fails
//   SPMD_DOUBLE_ASYNC_ERROR=1       every op hangs and the async error query reports a remote error
//   SPMD_DOUBLE_STALL_RANK=r        rank r's ops hang until the communicator is aborted
//   SPMD_DOUBLE_STALL_INIT_RANK=r   rank r's join does not return (for 30 s): every rank's init blocks
//   SPMD_DOUBLE_STALL_SPLIT_RANK=r  rank r (of the root) does not return from a split (for 30 s): every
//                                   rank's split blocks
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/shm/segment.h"
#include "backends/shm/shm_transport.h"
#include "algorithms/group_transport.h"
#include "common/export.h"
#include "common/stream.h"
#include "base/op_queue.h"
#include "runtime/transport_collectives.h"

namespace spmd::doubles {

class DoubleComm {
 public:
  // A fresh shm name for the root's id.
  static std::string newName();
  // Collective: rank 0 creates the segment `name`, the others attach once it exists; returns once every
  // rank joined, or null on failure (SPMD_DOUBLE_FAIL_INIT, a bad argument, a 30 s wait).
  static std::unique_ptr<DoubleComm> join(const std::string& name, int nranks, int rank);

  // Collective over this communicator's ranks, after the ops queued before it: the ranks passing `color`
  // ranked by (key, rank). Null for a negative color (NCCL_SPLIT_NOCOLOR); throws CommError on failure.
  std::unique_ptr<DoubleComm> split(int color, int key);

  int rank() const { return transport_->rank(); }
  int size() const { return transport_->size(); }
  TransportCollectives& algorithms() { return algorithms_; }
  Transport& transport() { return *transport_; }

  // Runs `op` after the ops issued before on this communicator and its splits, counting it on `stream` (a
  // device double's) until it ran; false when the stream is null or the communicator was aborted. An op that throws leaves
  // failed() set.
  bool enqueue(void* stream, std::function<void()> op);
  bool failed() const { return shared_->failed; }
  // The fault SPMD_DOUBLE_ASYNC_ERROR asks for: report an async error.
  bool asyncFault() const { return shared_->asyncFault; }
  // Wakes this rank's running op, tells the other ranks, drops queued ops, for this communicator and every
  // one split from the same root; then delete the communicator.
  void abort();

 private:
  // What a root communicator and its splits share; the worker thread last, joined first.
  struct Shared {
    Shared(shm::Segment seg, int rank) : segment(std::move(seg)), transport(segment, rank, 0) {}
    shm::Segment segment;
    shm::ShmTransport transport;
    std::atomic<bool> aborted{false};
    std::atomic<bool> failed{false};
    bool hang = false;
    bool asyncFault = false;
    OpQueue worker;
  };

  DoubleComm(std::shared_ptr<Shared> shared, std::unique_ptr<GroupTransport> group, std::vector<int> rootRanks);

  std::shared_ptr<Shared> shared_;
  std::unique_ptr<GroupTransport> group_;  // a split's view of the root's transport
  Transport* transport_;
  std::vector<int> rootRanks_;             // this communicator's ranks as the root's
  TransportCollectives algorithms_;
};

}  // namespace spmd::doubles
