// The last ops a lane ran, kept so that a deadline or a dead peer can be explained after the fact (which
// op, which peers, how far it got), and this rank's place in the op sequence, which it publishes for its
// peers. A fixed ring written only by the lane's own thread: no lock and no allocation on the hot path.
// It is read between runs (the communicator refuses while one is in flight), so plain fields suffice.
#pragma once
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/collectives.h"
#include "base/transport.h"

namespace spmd {

enum class OpState : uint8_t { Running, Done, Failed, TimedOut, PeerGone, Aborted };

std::string_view opStateName(OpState s);
// The state an op ends in when it throws `e` (by the CommError's code).
OpState failedState(const std::exception& e);

// Where a rank is, as its peers can see it: shm keeps one per rank and lane in the segment, MPI answers
// roll calls from it. Both fields are written by the owner only.
struct alignas(64) Presence {
  // (seq << 1) | 1 while op `seq` runs, (seq << 1) once it ended; 0 before the first op.
  std::atomic<uint64_t> position{0};
  // Steady-clock nanoseconds of the owner's last sign of life (an op starting or ending, a waiting slice).
  std::atomic<int64_t> aliveNs{0};
};

inline uint64_t positionSeq(uint64_t position) { return position >> 1; }
inline bool positionInOp(uint64_t position) { return (position & 1) != 0; }
inline int64_t nanos(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
inline int64_t steadyNowNs() { return nanos(std::chrono::steady_clock::now()); }

struct FlightEntry {
  static constexpr size_t kPeers = 4;
  static constexpr size_t kStageChars = 32;

  uint64_t seq = 0;  // the communicator's op number, the same op on every rank
  int32_t step = -1;  // -1: outside the step loop (setup, reporting)
  OpKind kind = OpKind::Barrier;
  OpState state = OpState::Running;
  char stage[kStageChars] = {};  // truncated copy: the program that named it may be gone when it is read
  uint64_t bytes = 0;            // the op's payload
  // The peers of the op's latest exchange (what it waits on when it hangs); the counts may exceed kPeers.
  int32_t to[kPeers] = {}, from[kPeers] = {};
  uint32_t toCount = 0, fromCount = 0;
  bool allPeers = false;  // a library collective over every rank (MPI), not point-to-point exchanges
  int64_t startNs = 0, endNs = 0;  // steady clock; endNs 0 while running
};

class FlightRecorder {
 public:
  static constexpr size_t kCapacity = 64;

  // Lane 0's recorder numbers every op of its communicator (the other lane's included), so numbers are
  // assigned in issue order, which every rank shares.
  uint64_t issue() { return ++issued_; }

  // `nowNs`: steady-clock nanoseconds, for callers that read the clock anyway (the executor times ops).
  void begin(uint64_t seq, int step, OpKind kind, std::string_view stage, uint64_t bytes, int64_t nowNs = steadyNowNs());
  // Marks op `seq` ended. An op posted earlier and completed later (after others began) keeps its entry,
  // unless the ring has moved past it.
  void end(uint64_t seq, OpState state, int64_t nowNs = steadyNowNs());
  // By the transport on each exchange of the op in progress.
  void notePeers(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs);
  void noteAllPeers();

  // The op this lane is in (or last ran), and its entry's text "stage ar, step 12" if still recorded.
  uint64_t currentSeq() const { return positionSeq(position()); }
  // Presence::position of this lane; any thread may read it while the lane runs.
  uint64_t position() const { return self_.position.load(std::memory_order_relaxed); }
  std::string describe(uint64_t seq) const;
  // The stage op `seq` ran for, as recorded (truncated to kStageChars); "" once the ring moved past it.
  std::string stage(uint64_t seq) const;

  // Where peers see this lane's position too (shm: a slot in the segment; MPI: the roll-call answerer).
  void mirrorTo(Presence* p) { mirror_ = p; }
  // Steady nanoseconds: a waiting lane's sign of life between ops.
  void alive(int64_t nowNs);

  // Oldest first.
  std::vector<FlightEntry> entries() const;

 private:
  void publish(uint64_t position, int64_t nowNs);
  const FlightEntry* find(uint64_t seq) const;

  std::array<FlightEntry, kCapacity> ring_{};
  uint64_t written_ = 0;  // entries ever begun; the next goes to ring_[written_ % kCapacity]
  uint64_t issued_ = 0;
  Presence self_;
  Presence* mirror_ = nullptr;
};

// Runs `body` as op `seq` of `lane`, recorded in the lane's flight recorder with how it ended.
template <typename Body>
void recordOp(Collectives& lane, uint64_t seq, int step, OpKind kind, std::string_view stage, uint64_t bytes, Body&& body) {
  FlightRecorder& f = lane.flight();
  f.begin(seq, step, kind, stage, bytes);
  try {
    body();
  } catch (const std::exception& e) {
    f.end(seq, failedState(e));
    throw;
  }
  f.end(seq, OpState::Done);
}

}  // namespace spmd
