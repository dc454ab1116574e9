// Transport over one lane of the shm segment: per-pair byte rings (large messages, where the ranks agreed,
// handed off single-copy through them), progress on all pending messages at once, futex sleep when nothing
// moves. Detects dead peers (pid gone) and ranks that aborted.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backends/shm/segment.h"
#include "base/transport.h"
#include "runtime/stragglers.h"

namespace spmd::shm {

class ShmTransport : public InterruptibleTransport {
 public:
  // `rank`: this process's place in the segment. `jobRanks[i]`: the job's rank of segment member i, for
  // messages, when the segment holds only this host's ranks of the job (empty: the same numbers).
  ShmTransport(const Segment& seg, int rank, int lane, std::vector<int> jobRanks = {});
  // Whether this rank's CPUs are shared with other ranks: its waits then yield at once instead of spinning.
  // Either way the lane's thread binds itself to a CPU at its first wait (pinOnce).
  void shareCores(bool shares);
  bool spins() const { return spinLimit_ > 2; }  // the rank has a core of its own (shareCores)
  // From now on messages of `fromBytes` and more move single-copy (a hand-off): the sender puts where the
  // message lies into the channel, the receiver reads it straight from the sender's memory
  // (process_vm_readv) and counts it in the channel's `pulled`, and only then does the sender's exchange
  // return. Every member must call it alike, once they agreed that they can read each other's memory.
  void handOffFrom(size_t fromBytes) { handOffFrom_ = fromBytes; }
  int rank() const override { return rank_; }
  // The job's rank of segment member `member`, as messages name it.
  int jobRank(int member) const { return jobRanks_.empty() ? member : jobRanks_[size_t(member)]; }
  int size() const override { return seg_.worldSize(); }
  void exchange(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs) override;
  // Only this rank's waits end (the hybrid transport's tcp half failed); the segment stays as it is.
  void interrupt() override;

  // Marks the whole segment aborted (first caller wins) and wakes every waiter on every lane.
  void abort(const std::string& reason);

  // The shared algorithms' synchronisation (backends/shm/arena.h): ranks publish how many steps they took
  // on this lane and wait for peers to reach a step, with the same spin, sleep and health checks as
  // exchange(). `peer` -1 waits for every rank; `what` names the wait in a deadline's message.
  void publishPhase(uint64_t phase);
  void awaitPhase(uint64_t phase, int peer, const char* what);

  // What the segment shows of every other member on this lane: its place in the op sequence and how long
  // since its last sign of life on any lane.
  std::vector<PeerSighting> sightings() const;

 private:
  // A hand-off's descriptor and how much of it has gone through the channel; a send's ticket is the
  // channel's `pulled` count that completes it.
  struct Handoff {
    Region where;
    size_t moved = 0;
    uint64_t ticket = 0;
    bool described() const { return moved == sizeof where; }
  };
  bool handsOff(size_t bytes) const { return bytes >= handOffFrom_; }
  // One pass over message i: moves what it can and says whether anything moved.
  bool advanceSend(size_t i, const SendSpec& s);
  bool advanceRecv(size_t i, const RecvSpec& r);
  size_t push(int to, const uint8_t* src, size_t bytes);
  size_t pull(int from, uint8_t* dst, size_t bytes);
  void ring(int peer);
  // One step of a spinning wait: a pause, or a yield where ranks outnumber cores.
  void relax() const;
  // Before the first wait of this lane's thread: binds it to laneCpu's CPU. Unbound, two spinning ranks
  // land on one CPU now and then (more so on a busy machine), and each then spins out its whole limit
  // before the other may run: 8-byte ops at W = 2 took 120 to 480 µs instead of 0.2.
  void pinOnce();
  // Sleeps on this rank's doorbell for at most a slice, unless it rang since `seenSeq` was read or
  // `blocked()` no longer holds.
  template <class Blocked>
  void sleep(uint32_t seenSeq, Blocked blocked);
  // Throws if the job aborted, a peer this rank waits for died, or the deadline passed. `blockedOn(peer)`
  // says what this rank waits for from `peer` ("" if nothing); `culprit` is the peer a deadline names.
  void checkHealth(const std::function<std::string(int)>& blockedOn, int culprit);
  std::string describePending(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs, int peer) const;
  int firstPending(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs) const;

  const Segment& seg_;
  int rank_;
  int lane_;
  Doorbell& bell_;
  int spinLimit_;
  bool pinned_ = false;  // pinOnce ran (on the lane's thread, the only one that waits)
  std::vector<int> jobRanks_;
  std::atomic<bool> interrupted_{false};
  std::vector<size_t> sent_;  // reused across exchanges: no allocation once warm
  std::vector<size_t> received_;
  std::vector<Handoff> sendHandoffs_, recvHandoffs_;
  size_t handOffFrom_ = SIZE_MAX;
  // Per peer, per pass: an earlier message to (from) it is unfinished, so a later one must not move yet.
  std::vector<uint8_t> sendBusy_, recvBusy_;
  std::vector<uint64_t> handedTo_;  // per peer: hand-offs described to it, the last one's ticket
};

}  // namespace spmd::shm
