// One transport over two: each peer goes to the one that reaches it (ranks on this host to the shm
// segment, the others to tcp), so the shared algorithms run unchanged on a job spread over hosts with
// several ranks per host. Both are byte-FIFO per pair, so their union is too.
//
// An exchange that involves both runs the local half on a helper thread while this thread runs the remote
// half: each half must keep moving while the other waits, or a ring that crosses hosts could stall on a full
// channel whose reader waits for the other half. When one half fails, the other is interrupted before the
// exchange returns, so neither touches the caller's buffers afterwards.
#pragma once
#include <vector>

#include "base/lane_worker.h"
#include "base/transport.h"

namespace spmd {

class HybridTransport : public Transport {
 public:
  // `localIndex[r]`: rank r's member index in `local`, or -1 when `remote` reaches it (under r's own rank).
  HybridTransport(int rank, std::vector<int> localIndex, InterruptibleTransport& local, InterruptibleTransport& remote);
  int rank() const override { return rank_; }
  int size() const override { return int(localIndex_.size()); }
  void exchange(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs) override;
  LinkUsage linkUsage() const override { return usage_; }

 private:
  int rank_;
  std::vector<int> localIndex_;
  InterruptibleTransport& local_;
  InterruptibleTransport& remote_;
  LaneWorker helper_;  // runs the local half of mixed exchanges
  // Reused across exchanges: no allocation once warm.
  std::vector<SendSpec> localSends_, remoteSends_;
  std::vector<RecvSpec> localRecvs_, remoteRecvs_;
  LinkUsage usage_{true};
  // Each half timed and its sent bytes counted (the local half's on the helper thread).
  void local();
  void remote();
};

}  // namespace spmd
