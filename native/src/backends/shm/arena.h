// One lane's staging slots, as the shared algorithms use them. An op moves its message in chunks; each
// chunk takes the next slot in turn and goes through a few steps (write, reduce, read) that every rank
// takes in the same order, publishing its step count so peers know when a slot holds what they need.
// A slot is written again only after every rank is done with its previous chunk, so ranks may run up to
// `slots` chunks apart without a barrier between ops.
#pragma once
#include <cstdint>
#include <vector>

#include "backends/shm/segment.h"
#include "backends/shm/shm_transport.h"

namespace spmd::shm {

class Arena {
 public:
  Arena(const Segment& seg, ShmTransport& t, int lane);
  int rank() const { return rank_; }
  int size() const { return seg_.worldSize(); }
  size_t slotBytes() const { return seg_.slotBytes(); }
  // The job's rank of member `member`, as messages name it (a host's segment under shm+tcp numbers its own).
  int jobRank(int member) const { return t_.jobRank(member); }

  // Starts the next chunk. `writes`: this rank fills its slot, so it first waits for every rank to finish
  // with that slot's previous chunk.
  void begin(bool writes, const char* what);
  char* mine() const { return reinterpret_cast<char*>(seg_.slot(lane_, rank_, slot_)); }
  const char* of(int rank) const { return reinterpret_cast<const char*>(seg_.slot(lane_, rank, slot_)); }
  // Finishes a step: what this rank wrote so far is visible to ranks waiting for this step.
  void step() { t_.publishPhase(++phase_); }
  // Waits until every rank (or `rank`) finished as many steps as this one.
  void awaitAll(const char* what) { t_.awaitPhase(phase_, -1, what); }
  void awaitRank(int rank, const char* what) { t_.awaitPhase(phase_, rank, what); }
  // Ends the chunk: its slot is free once every rank finished as many steps as this one has now.
  void end() { freeAt_[size_t(slot_)] = phase_; }

 private:
  const Segment& seg_;
  ShmTransport& t_;
  int lane_;
  int rank_;
  uint64_t phase_ = 0;
  uint64_t chunks_ = 0;
  int slot_ = 0;
  std::vector<uint64_t> freeAt_;
};

}  // namespace spmd::shm
