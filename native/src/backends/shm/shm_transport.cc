#include "backends/shm/shm_transport.h"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "backends/shm/futex.h"
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
      sendBusy_(size_t(seg.worldSize())), recvBusy_(size_t(seg.worldSize())) {
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

void ShmTransport::exchange(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs) {
  if (flight_) flight_->notePeers(sends, recvs);
  sent_.assign(sends.size(), 0);
  received_.assign(recvs.size(), 0);
  int idle = 0;
  for (;;) {
    uint32_t seq = bell_.seq.load(std::memory_order_acquire);
    bool moved = false, done = true;
    // Bytes between a pair are FIFO: of several messages to one peer (from one peer) only the earliest
    // unfinished one moves, or a later one would take bytes that belong to it.
    std::fill(sendBusy_.begin(), sendBusy_.end(), 0);
    std::fill(recvBusy_.begin(), recvBusy_.end(), 0);
    for (size_t i = 0; i < sends.size(); ++i) {
      size_t left = sends[i].bytes - sent_[i];
      if (left == 0) continue;
      uint8_t& busy = sendBusy_[size_t(sends[i].peer)];
      size_t n = busy ? 0 : push(sends[i].peer, static_cast<const uint8_t*>(sends[i].data) + sent_[i], left);
      sent_[i] += n;
      moved |= n > 0;
      done &= n == left;
      busy |= n < left;
    }
    for (size_t i = 0; i < recvs.size(); ++i) {
      size_t left = recvs[i].bytes - received_[i];
      if (left == 0) continue;
      uint8_t& busy = recvBusy_[size_t(recvs[i].peer)];
      size_t n = busy ? 0 : pull(recvs[i].peer, static_cast<uint8_t*>(recvs[i].data) + received_[i], left);
      received_[i] += n;
      moved |= n > 0;
      done &= n == left;
      busy |= n < left;
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
