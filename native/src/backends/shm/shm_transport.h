// Transport over one lane of the shm segment: per-pair byte rings, progress on all pending messages at
// once, futex sleep when nothing moves. Detects dead peers (pid gone) and ranks that aborted.
#pragma once
#include <atomic>
#include <string>
#include <vector>

#include "backends/shm/segment.h"
#include "core/transport.h"

namespace spmd::shm {

class ShmTransport : public InterruptibleTransport {
 public:
  // `rank`: this process's place in the segment. `jobRanks[i]`: the job's rank of segment member i, for
  // messages, when the segment holds only this host's ranks of the job (empty: the same numbers).
  ShmTransport(const Segment& seg, int rank, int lane, std::vector<int> jobRanks = {});
  int rank() const override { return rank_; }
  int size() const override { return seg_.worldSize(); }
  void exchange(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs) override;
  // Only this rank's waits end (the hybrid transport's tcp half failed); the segment stays as it is.
  void interrupt() override;

  // Marks the whole segment aborted (first caller wins) and wakes every waiter on every lane.
  void abort(const std::string& reason);

 private:
  size_t push(int to, const uint8_t* src, size_t bytes);
  size_t pull(int from, uint8_t* dst, size_t bytes);
  void ring(int peer);
  void sleep(uint32_t seenSeq);
  void checkHealth(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs);
  // After a deadline: the peers that never reached this rank's op or went silent in it ("" if none).
  std::string stragglers() const;
  int jobRank(int member) const { return jobRanks_.empty() ? member : jobRanks_[size_t(member)]; }

  const Segment& seg_;
  int rank_;
  int lane_;
  Doorbell& bell_;
  int spinLimit_;
  std::vector<int> jobRanks_;
  std::atomic<bool> interrupted_{false};
  std::vector<size_t> sent_;  // reused across exchanges: no allocation once warm
  std::vector<size_t> received_;
};

}  // namespace spmd::shm
