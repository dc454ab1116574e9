#include "backends/shm/single_copy.h"

#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>

#include "base/error.h"
#include "kernels/cpu/stream_copy.h"

namespace spmd::shm {
namespace {

// The kernel moves at most about 2 GiB per call (MAX_RW_COUNT) and may move less; calls take at most this.
constexpr size_t kPerCall = size_t(1) << 30;

// What a rank publishes in its slot, followed by its W regions.
struct Record {
  uint32_t overlaps;  // move: this rank's buffers overlap so that single copy would corrupt them
  uint64_t nonceAt;   // agree: where this rank's nonce lies in its own memory, and its value
  uint64_t nonce;
  char why[232];  // agree: why this rank cannot move single-copy ("" when it can)
};

const Record& recordOf(const char* slot) { return *reinterpret_cast<const Record*>(slot); }
Region* regionsOf(char* slot) { return reinterpret_cast<Region*>(slot + sizeof(Record)); }
const Region* regionsOf(const char* slot) { return reinterpret_cast<const Region*>(slot + sizeof(Record)); }

// strerror, and under Yama the setting that refuses.
std::string describeErrno(int e) {
  std::string why = std::strerror(e);
  int scope = 0;
  if (e == EPERM && (std::ifstream("/proc/sys/kernel/yama/ptrace_scope") >> scope) && scope > 0) {
    why += " (kernel.yama.ptrace_scope=" + std::to_string(scope) + ")";
  }
  return why;
}

// One call's worth of a move between this process's `local` and process `pid`'s `remote`; -1 and errno.
ssize_t moveOnce(bool pull, pid_t pid, char* local, uint64_t remote, size_t n) {
  iovec mine{local, n}, theirs{reinterpret_cast<void*>(uintptr_t(remote)), n};
  return pull ? process_vm_readv(pid, &mine, 1, &theirs, 1, 0) : process_vm_writev(pid, &mine, 1, &theirs, 1, 0);
}

// 128 KiB, 1 MiB: the sizes copyPath names are whole KiB.
std::string sizeText(size_t bytes) {
  if (bytes % (1 << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes % (1 << 10) == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " bytes";
}

bool overlap(const Region& a, const Region& b) {
  return a.bytes != 0 && b.bytes != 0 && a.at < b.at + b.bytes && b.at < a.at + a.bytes;
}

}  // namespace

void moveAll(bool pull, int32_t pid, char* local, uint64_t remote, size_t n, int peer) {
  for (size_t done = 0; done < n;) {
    const ssize_t got = moveOnce(pull, pid, local + done, remote + done, std::min(n - done, kPerCall));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      throw CommError(code::kSystem, std::string("shm single copy: ") + (pull ? "process_vm_readv from" : "process_vm_writev to") +
                                         " rank " + std::to_string(peer) + " failed after " + std::to_string(done) + " of " +
                                         std::to_string(n) + " bytes: " + (got < 0 ? describeErrno(errno) : "it moved nothing"));
    }
    done += size_t(got);
  }
}

std::string describeCopyPath(const std::string& staged, const SingleCopyFrom& from) {
  if (!staged.empty()) return "staged (" + staged + ")";
  std::string text = "single-copy: cma (process_vm_readv/writev) from " + sizeText(from.blocks);
  if (from.broadcast != SIZE_MAX) text += ", broadcast from " + sizeText(from.broadcast);
  if (from.reductions != SIZE_MAX) text += ", reductions pulled from " + sizeText(from.reductions);
  return text + " (" + from.how + ")";
}

std::string singleCopyRefusal() {
  static const volatile uint64_t word = 0x73706d642d636d61ull;  // "spmd-cma"
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) return std::string("fork failed: ") + std::strerror(errno);
  if (child == 0) {  // only system calls until _exit: the parent has threads
    uint64_t got = 0;
    const ssize_t n = moveOnce(true, parent, reinterpret_cast<char*>(&got), uint64_t(uintptr_t(&word)), sizeof got);
    _exit(n == ssize_t(sizeof got) && got == word ? 0 : n < 0 ? std::min(errno, 254) : 255);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
  if (!WIFEXITED(status)) return "the probing child did not exit";
  const int code = WEXITSTATUS(status);
  if (code == 0) return "";
  return "process_vm_readv: " + (code == 255 ? std::string("read the wrong bytes") : describeErrno(code));
}

SingleCopy::SingleCopy(const Segment& seg, Arena& arena)
    : seg_(seg), arena_(arena), nonce_(std::random_device{}() | uint64_t(std::random_device{}()) << 32),
      shared_(size_t(seg.worldSize())), local_(size_t(seg.worldSize())) {}

std::string SingleCopy::probePeers() const {
  const int W = arena_.size(), me = arena_.rank();
  for (int j = 0; j < W; ++j) {
    if (j == me && W > 1) continue;
    const Record& r = recordOf(arena_.of(j));
    uint64_t got = 0;
    const pid_t pid = seg_.doorbell(0, j).pid.load(std::memory_order_acquire);
    const ssize_t n = moveOnce(true, pid, reinterpret_cast<char*>(&got), r.nonceAt, sizeof got);
    if (n < 0) return "process_vm_readv from rank " + std::to_string(arena_.jobRank(j)) + ": " + describeErrno(errno);
    // Another process under that pid (ranks in different pid namespaces) would not hold the nonce.
    if (n != ssize_t(sizeof got) || got != r.nonce) return "process_vm_readv from rank " + std::to_string(arena_.jobRank(j)) + " read another process";
  }
  return "";
}

std::string SingleCopy::agree(bool allowed) {
  const int W = arena_.size();
  if (sizeof(Record) + sizeof(Region) * size_t(W) > arena_.slotBytes()) return "the segment's slots are too small for the handshake";
  arena_.begin(true, "the single-copy probe");
  auto* mine = reinterpret_cast<Record*>(arena_.mine());
  mine->nonceAt = uint64_t(uintptr_t(&nonce_));
  mine->nonce = nonce_;
  arena_.step();
  arena_.awaitAll("the single-copy probe (the peers' records)");
  const std::string why = allowed ? probePeers() : "SPMD_SHM_SINGLE_COPY=0";
  std::snprintf(mine->why, sizeof mine->why, "%s", why.c_str());
  arena_.step();
  arena_.awaitAll("the single-copy probe (the peers' verdicts)");
  std::string agreed;
  for (int j = 0; j < W && agreed.empty(); ++j) {
    const char* theirs = recordOf(arena_.of(j)).why;
    if (theirs[0]) agreed = "rank " + std::to_string(arena_.jobRank(j)) + ": " + std::string(theirs, strnlen(theirs, sizeof mine->why));
  }
  arena_.step();  // every rank has read every verdict: the slot may be written again
  arena_.end();
  return agreed;
}

// Whether a peer's move would touch what this rank writes or reads in its own buffers for another peer.
bool SingleCopy::overlapsOwn() const {
  const int W = arena_.size(), me = arena_.rank();
  for (int j = 0; j < W; ++j) {
    for (int k = 0; k < W; ++k) {
      if (k != me && overlap(shared_[size_t(j)], local_[size_t(k)])) return true;
    }
  }
  return false;
}

bool SingleCopy::moveRegions(bool pull, const char* what, bool stream) {
  const int W = arena_.size(), me = arena_.rank();
  arena_.begin(true, what);
  char* slot = arena_.mine();
  reinterpret_cast<Record*>(slot)->overlaps = overlapsOwn() ? 1 : 0;
  std::copy(shared_.begin(), shared_.end(), regionsOf(slot));
  arena_.step();
  arena_.awaitAll(what);
  bool staged = false;
  for (int j = 0; j < W; ++j) staged |= recordOf(arena_.of(j)).overlaps != 0;
  if (!staged) {
    // This rank's own block moves within its memory.
    char* shared = reinterpret_cast<char*>(uintptr_t(shared_[size_t(me)].at));
    char* local = reinterpret_cast<char*>(uintptr_t(local_[size_t(me)].at));
    kernels::copyOut(stream, pull ? local : shared, pull ? shared : local, shared_[size_t(me)].bytes);
    for (int k = 1; k < W; ++k) {  // each rank starts on a different peer
      const int j = (me + k) % W;
      const Region there = regionsOf(arena_.of(j))[me], here = local_[size_t(j)];
      if (there.bytes != here.bytes) {
        throw CommError(code::kInvalid, std::string(what) + ": rank " + std::to_string(j) + " has " + std::to_string(there.bytes) +
                                            " bytes for this rank, which has " + std::to_string(here.bytes) + " for it");
      }
      const pid_t pid = seg_.doorbell(0, j).pid.load(std::memory_order_acquire);
      moveAll(pull, pid, reinterpret_cast<char*>(uintptr_t(here.at)), there.at, here.bytes, j);
    }
  }
  arena_.step();
  if (!staged) arena_.awaitAll(what);  // peers may still be moving this rank's buffers
  arena_.end();
  return !staged;
}

}  // namespace spmd::shm
