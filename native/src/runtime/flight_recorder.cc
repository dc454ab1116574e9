#include "runtime/flight_recorder.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"

namespace spmd {

std::string_view opStateName(OpState s) {
  switch (s) {
    case OpState::Running: return "running";
    case OpState::Done: return "done";
    case OpState::Failed: return "failed";
    case OpState::TimedOut: return "timed out";
    case OpState::PeerGone: return "peer gone";
    case OpState::Aborted: return "aborted";
  }
  return "?";
}

OpState failedState(const std::exception& e) {
  const auto* ce = dynamic_cast<const CommError*>(&e);
  if (!ce) return OpState::Failed;
  std::string_view c = ce->code();
  if (c == code::kTimeout) return OpState::TimedOut;
  if (c == code::kPeerGone) return OpState::PeerGone;
  if (c == code::kAborted) return OpState::Aborted;
  return OpState::Failed;
}

void FlightRecorder::publish(uint64_t position, int64_t nowNs) {
  self_.position.store(position, std::memory_order_relaxed);
  if (!mirror_) return;
  mirror_->aliveNs.store(nowNs, std::memory_order_relaxed);
  mirror_->position.store(position, std::memory_order_release);
}

void FlightRecorder::alive(int64_t nowNs) {
  if (mirror_) mirror_->aliveNs.store(nowNs, std::memory_order_relaxed);
}

void FlightRecorder::begin(uint64_t seq, int step, OpKind kind, std::string_view stage, uint64_t bytes, int64_t nowNs) {
  FlightEntry& e = ring_[written_++ % kCapacity];
  e.seq = seq;
  e.step = step;
  e.kind = kind;
  e.state = OpState::Running;
  const size_t n = std::min(stage.size(), FlightEntry::kStageChars - 1);
  std::memcpy(e.stage, stage.data(), n);
  e.stage[n] = '\0';
  e.bytes = bytes;
  e.toCount = e.fromCount = 0;
  e.allPeers = false;
  e.startNs = nowNs;
  e.endNs = 0;
  publish((seq << 1) | 1, e.startNs);
}

const FlightEntry* FlightRecorder::find(uint64_t seq) const {
  const uint64_t kept = std::min<uint64_t>(written_, kCapacity);
  for (uint64_t k = 1; k <= kept; ++k) {  // newest first: the op asked about is almost always recent
    const FlightEntry& e = ring_[(written_ - k) % kCapacity];
    if (e.seq == seq) return &e;
  }
  return nullptr;
}

void FlightRecorder::end(uint64_t seq, OpState state, int64_t now) {
  if (auto* e = const_cast<FlightEntry*>(find(seq))) {
    e->state = state;
    e->endNs = now;
  }
  // A posted op completing after later ops began must not move the published position back.
  if (seq == currentSeq()) publish(seq << 1, now);
}

void FlightRecorder::notePeers(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs) {
  if (written_ == 0) return;  // an exchange outside any recorded op (a test driving a transport directly)
  FlightEntry& e = ring_[(written_ - 1) % kCapacity];
  e.toCount = uint32_t(sends.size());
  e.fromCount = uint32_t(recvs.size());
  for (size_t i = 0; i < std::min(sends.size(), FlightEntry::kPeers); ++i) e.to[i] = sends[i].peer;
  for (size_t i = 0; i < std::min(recvs.size(), FlightEntry::kPeers); ++i) e.from[i] = recvs[i].peer;
}

void FlightRecorder::noteAllPeers() {
  if (written_ > 0) ring_[(written_ - 1) % kCapacity].allPeers = true;
}

std::string FlightRecorder::describe(uint64_t seq) const {
  const FlightEntry* e = find(seq);
  if (!e) return "";
  // The runner's own ops are named in parentheses, "(step start)", which no stage id can be.
  std::string_view name = e->stage;
  std::string text = name.starts_with('(') && name.ends_with(')') ? std::string(name.substr(1, name.size() - 2))
                                                                   : "stage " + std::string(name);
  if (e->step >= 0) text += ", step " + std::to_string(e->step);
  return text;
}

std::string FlightRecorder::stage(uint64_t seq) const {
  const FlightEntry* e = find(seq);
  return e ? std::string(e->stage) : std::string();
}

std::vector<FlightEntry> FlightRecorder::entries() const {
  std::vector<FlightEntry> out;
  const uint64_t kept = std::min<uint64_t>(written_, kCapacity);
  for (uint64_t k = kept; k >= 1; --k) out.push_back(ring_[(written_ - k) % kCapacity]);
  return out;
}

}  // namespace spmd
