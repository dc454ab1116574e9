#include "backends/shm/shm_transport.h"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "backends/shm/futex.h"
#include "backends/shm/single_copy.h"
#include "base/cores.h"
#include "base/error.h"
#include "runtime/stragglers.h"

namespace spmd::shm {
namespace {

// Publishing at most this much per step lets the receiver start copying while the sender still writes.
constexpr size_t kStepBytes = 64 * 1024;
// A sleeping rank re-checks deadline, aborts and peer liveness this often.
constexpr int64_t kSleepSliceNs = 50'000'000;

}  // namespace

ShmTransport::ShmTransport(const Segment& seg, int rank, int lane, std::vector<int> jobRanks)
    : seg_(seg), rank_(rank), lane_(lane), bell_(seg.doorbell(lane, rank)), jobRanks_(std::move(jobRanks)),
      sendBusy_(size_t(seg.worldSize())), recvBusy_(size_t(seg.worldSize())), handedTo_(size_t(seg.worldSize())) {
  bell_.pid.store(int32_t(getpid()), std::memory_order_release);
  // Without word from the ranks' bindings: as if every rank may run on every CPU this one may.
  shareCores(unsigned(seg.worldSize()) > usableCores());
}

void ShmTransport::shareCores(bool shares) {
  // Spinning only pays when this rank has a core of its own (mpirun's default binding gives it one, though
  // it sees a single CPU); ranks that share cores yield them at once.
  spinLimit_ = shares ? 2 : 4000;
}

size_t ShmTransport::push(int to, const uint8_t* src, size_t bytes) {
  ChannelHead& ch = seg_.channel(lane_, rank_, to);
  uint64_t head = ch.head.load(std::memory_order_relaxed);
  uint64_t tail = ch.tail.load(std::memory_order_acquire);
  size_t cap = seg_.channelBytes();
  size_t n = std::min({bytes, size_t(cap - (head - tail)), kStepBytes});
  if (n == 0) return 0;
  uint8_t* data = seg_.channelData(lane_, rank_, to);
  size_t at = head % cap;
  size_t first = std::min(n, cap - at);
  std::memcpy(data + at, src, first);
  std::memcpy(data, src + first, n - first);
  ch.head.store(head + n, std::memory_order_release);
  ring(to);
  return n;
}

size_t ShmTransport::pull(int from, uint8_t* dst, size_t bytes) {
  ChannelHead& ch = seg_.channel(lane_, from, rank_);
  uint64_t tail = ch.tail.load(std::memory_order_relaxed);
  uint64_t head = ch.head.load(std::memory_order_acquire);
  size_t n = std::min({bytes, size_t(head - tail), kStepBytes});
  if (n == 0) return 0;
  size_t cap = seg_.channelBytes();
  const uint8_t* data = seg_.channelData(lane_, from, rank_);
  size_t at = tail % cap;
  size_t first = std::min(n, cap - at);
  std::memcpy(dst, data + at, first);
  std::memcpy(dst + first, data, n - first);
  ch.tail.store(tail + n, std::memory_order_release);
  ring(from);
  return n;
}

void ShmTransport::ring(int peer) {
  Doorbell& b = seg_.doorbell(lane_, peer);
  b.seq.fetch_add(1, std::memory_order_seq_cst);
  if (b.sleepers.load(std::memory_order_seq_cst) != 0) futexWakeAll(&b.seq);
}

// The CPU's spin-wait hint: it frees the core's pipeline for a sibling hyperthread (and saves power)
// without giving up the time slice.
static inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  asm volatile("yield" ::: "memory");
#endif
}

void ShmTransport::pinOnce() {
  if (pinned_) return;
  pinned_ = true;
  if (const int cpu = laneCpu(unsigned(rank_), unsigned(lane_), unsigned(seg_.worldSize())); cpu >= 0) pinThisThread(unsigned(cpu));
}

void ShmTransport::relax() const {
  if (spins()) cpuRelax(); else sched_yield();
}

template <class Blocked>
void ShmTransport::sleep(uint32_t seenSeq, Blocked blocked) {
  const Clock::time_point now = Clock::now();
  // Waiting is a sign of life: a peer whose deadline passes tells this rank from a stopped one by it.
  if (lifeSigns_) lifeSigns_->alive(nanos(now));
  // Counted as a sleeper before the last look: a peer that publishes after it rings, one before it is seen.
  bell_.sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (bell_.seq.load(std::memory_order_seq_cst) == seenSeq && blocked()) {
    auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline_ - now).count();
    futexWait(&bell_.seq, seenSeq, std::clamp<int64_t>(left, 0, kSleepSliceNs));
  }
  bell_.sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

void ShmTransport::abort(const std::string& reason) {
  SegmentHeader& h = seg_.header();
  uint32_t expected = 0;
  if (h.aborted.load() == 0) {
    std::snprintf(h.abortReason, sizeof h.abortReason, "%s", reason.c_str());
    h.aborted.compare_exchange_strong(expected, uint32_t(jobRank(rank_) + 1));
  }
  for (int lane = 0; lane < seg_.lanes(); ++lane) {
    for (int r = 0; r < seg_.worldSize(); ++r) {
      Doorbell& b = seg_.doorbell(lane, r);
      b.seq.fetch_add(1);
      futexWakeAll(&b.seq);
    }
  }
}

void ShmTransport::interrupt() {
  interrupted_.store(true, std::memory_order_release);
  bell_.seq.fetch_add(1, std::memory_order_seq_cst);
  futexWakeAll(&bell_.seq);
}

void ShmTransport::checkHealth(const std::function<std::string(int)>& blockedOn, int culprit) {
  const SegmentHeader& h = seg_.header();
  if (uint32_t who = h.aborted.load(std::memory_order_acquire)) {
    throw CommError(code::kAborted, "rank " + std::to_string(who - 1) + " aborted the job: " + h.abortReason);
  }
  if (interrupted_.load(std::memory_order_acquire)) throw Interrupted();
  for (int peer = 0; peer < seg_.worldSize(); ++peer) {
    if (peer == rank_) continue;
    int32_t pid = seg_.doorbell(0, peer).pid.load(std::memory_order_acquire);
    if (pid <= 0 || kill(pid, 0) == 0 || errno != ESRCH) continue;
    std::string doing = blockedOn(peer);
    if (doing.empty()) continue;
    throw CommError(code::kPeerGone, "rank " + std::to_string(jobRank(peer)) + " (pid " + std::to_string(pid) +
                                         ") died while this rank was " + doing);
  }
  if (Clock::now() >= deadline_) {
    throw CommError(code::kTimeout, "deadline passed while " + (culprit >= 0 ? blockedOn(culprit) : std::string("waiting")) + stragglers());
  }
}

std::string ShmTransport::describePending(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs, int peer) const {
  for (size_t i = 0; i < sends.size(); ++i) {
    if (sends[i].peer == peer && sent_[i] < sends[i].bytes)
      return "sending " + std::to_string(sends[i].bytes) + " bytes to rank " + std::to_string(jobRank(peer)) + " (" +
             std::to_string(sent_[i]) + " done)";
  }
  for (size_t i = 0; i < recvs.size(); ++i) {
    if (recvs[i].peer == peer && received_[i] < recvs[i].bytes)
      return "receiving " + std::to_string(recvs[i].bytes) + " bytes from rank " + std::to_string(jobRank(peer)) + " (" +
             std::to_string(received_[i]) + " done)";
  }
  return "";
}

int ShmTransport::firstPending(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs) const {
  // A receive names the peer this rank waits on; a send only one that is slow to drain.
  for (size_t i = 0; i < recvs.size(); ++i) if (received_[i] < recvs[i].bytes) return recvs[i].peer;
  for (size_t i = 0; i < sends.size(); ++i) if (sent_[i] < sends[i].bytes) return sends[i].peer;
  return -1;
}

void ShmTransport::publishPhase(uint64_t phase) {
  seg_.phase(lane_, rank_).phase.store(phase, std::memory_order_seq_cst);
  // Only sleepers need a wake: a waiter counts itself a sleeper before its last look at the flags, so
  // either it sees this store or this load sees it (both seq_cst), and no wake is lost.
  for (int peer = 0; peer < seg_.worldSize(); ++peer) {
    if (peer == rank_) continue;
    Doorbell& b = seg_.doorbell(lane_, peer);
    if (b.sleepers.load(std::memory_order_seq_cst) != 0) {
      b.seq.fetch_add(1, std::memory_order_seq_cst);
      futexWakeAll(&b.seq);
    }
  }
}

void ShmTransport::awaitPhase(uint64_t phase, int peer, const char* what) {
  auto behind = [&](int j) { return j != rank_ && seg_.phase(lane_, j).phase.load(std::memory_order_seq_cst) < phase; };
  auto firstBehind = [&] {
    if (peer >= 0) return behind(peer) ? peer : -1;
    for (int j = 0; j < seg_.worldSize(); ++j) if (behind(j)) return j;
    return -1;
  };
  int waitingOn = firstBehind();
  if (waitingOn < 0) return;
  if (flight_) flight_->noteAllPeers();
  pinOnce();
  for (int i = 0; i < spinLimit_; ++i) {
    relax();
    if ((waitingOn = firstBehind()) < 0) return;
  }
  for (;;) {
    sleep(bell_.seq.load(std::memory_order_seq_cst), [&] { return firstBehind() >= 0; });
    if ((waitingOn = firstBehind()) < 0) return;
    checkHealth([&](int j) {
      return behind(j) && (peer < 0 || j == peer)
                 ? std::string("waiting for rank ") + std::to_string(jobRank(j)) + " in " + what
                 : std::string();
    }, waitingOn);
  }
}

std::vector<PeerSighting> ShmTransport::sightings() const {
  const int64_t now = steadyNowNs();
  std::vector<PeerSighting> peers;
  for (int r = 0; r < seg_.worldSize(); ++r) {
    if (r == rank_) continue;
    // A rank whose one lane waits on the other (lane 0 on an igather) still lives: any lane's sign counts.
    int64_t alive = 0;
    for (int l = 0; l < seg_.lanes(); ++l) alive = std::max(alive, seg_.presence(l, r).aliveNs.load(std::memory_order_relaxed));
    const uint64_t position = seg_.presence(lane_, r).position.load(std::memory_order_acquire);
    peers.push_back({jobRank(r), true, position, alive ? double(now - alive) * 1e-9 : -1, {}});
  }
  return peers;
}

bool ShmTransport::advanceSend(size_t i, const SendSpec& s) {
  if (!handsOff(s.bytes)) {
    const size_t n = push(s.peer, static_cast<const uint8_t*>(s.data) + sent_[i], s.bytes - sent_[i]);
    sent_[i] += n;
    return n > 0;
  }
  Handoff& h = sendHandoffs_[i];
  if (!h.described()) {
    const size_t n = push(s.peer, reinterpret_cast<const uint8_t*>(&h.where) + h.moved, sizeof h.where - h.moved);
    h.moved += n;
    if (h.described()) h.ticket = ++handedTo_[size_t(s.peer)];
    return n > 0;
  }
  if (seg_.channel(lane_, rank_, s.peer).pulled.load(std::memory_order_acquire) < h.ticket) return false;
  sent_[i] = s.bytes;
  return true;
}

bool ShmTransport::advanceRecv(size_t i, const RecvSpec& r) {
  if (!handsOff(r.bytes)) {
    const size_t n = pull(r.peer, static_cast<uint8_t*>(r.data) + received_[i], r.bytes - received_[i]);
    received_[i] += n;
    return n > 0;
  }
  Handoff& h = recvHandoffs_[i];
  if (!h.described()) {
    h.moved += pull(r.peer, reinterpret_cast<uint8_t*>(&h.where) + h.moved, sizeof h.where - h.moved);
    if (!h.described()) return h.moved > 0;
  }
  if (h.where.bytes != r.bytes) {
    throw CommError(code::kInvalid, "rank " + std::to_string(jobRank(r.peer)) + " hands off " + std::to_string(h.where.bytes) +
                                        " bytes where this rank receives " + std::to_string(r.bytes) + " from it");
  }
  const int32_t pid = seg_.doorbell(0, r.peer).pid.load(std::memory_order_acquire);
  try {
    moveAll(true, pid, static_cast<char*>(r.data), h.where.at, r.bytes, jobRank(r.peer));
  } catch (const CommError&) {
    // A sender that died after describing its message: say so, as a wait for it would.
    if (kill(pid, 0) != 0 && errno == ESRCH) {
      throw CommError(code::kPeerGone, "rank " + std::to_string(jobRank(r.peer)) + " (pid " + std::to_string(pid) +
                                           ") died while this rank was reading " + std::to_string(r.bytes) + " bytes from it");
    }
    throw;
  }
  seg_.channel(lane_, r.peer, rank_).pulled.fetch_add(1, std::memory_order_release);
  ring(r.peer);
  received_[i] = r.bytes;
  return true;
}

void ShmTransport::exchange(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs) {
  if (flight_) flight_->notePeers(sends, recvs);
  sent_.assign(sends.size(), 0);
  received_.assign(recvs.size(), 0);
  sendHandoffs_.resize(sends.size());
  recvHandoffs_.resize(recvs.size());
  for (size_t i = 0; i < sends.size(); ++i) sendHandoffs_[i] = {region(sends[i].data, sends[i].bytes)};
  for (size_t i = 0; i < recvs.size(); ++i) recvHandoffs_[i] = {};
  int idle = 0;
  for (;;) {
    uint32_t seq = bell_.seq.load(std::memory_order_acquire);
    bool moved = false, done = true;
    // Bytes between a pair are FIFO: of several messages to one peer (from one peer) only the earliest
    // unfinished one moves, or a later one would take bytes that belong to it. A hand-off holds later
    // messages back only until it is described: what follows in the channel comes after it either way.
    std::fill(sendBusy_.begin(), sendBusy_.end(), 0);
    std::fill(recvBusy_.begin(), recvBusy_.end(), 0);
    for (size_t i = 0; i < sends.size(); ++i) {
      if (sent_[i] == sends[i].bytes) continue;
      uint8_t& busy = sendBusy_[size_t(sends[i].peer)];
      if (!busy) moved |= advanceSend(i, sends[i]);
      done &= sent_[i] == sends[i].bytes;
      busy |= handsOff(sends[i].bytes) ? !sendHandoffs_[i].described() : sent_[i] < sends[i].bytes;
    }
    for (size_t i = 0; i < recvs.size(); ++i) {
      if (received_[i] == recvs[i].bytes) continue;
      uint8_t& busy = recvBusy_[size_t(recvs[i].peer)];
      if (!busy) moved |= advanceRecv(i, recvs[i]);
      done &= received_[i] == recvs[i].bytes;
      busy |= received_[i] < recvs[i].bytes;
    }
    if (done) return;
    if (moved) {
      idle = 0;
      continue;
    }
    if (idle < spinLimit_) {
      if (idle++ == 0) pinOnce();
      relax();
      continue;
    }
    sleep(seq, [] { return true; });
    checkHealth([&](int peer) { return describePending(sends, recvs, peer); }, firstPending(sends, recvs));
  }
}

}  // namespace spmd::shm
