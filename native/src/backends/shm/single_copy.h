// Single-copy moves for the shm backend's large messages: each block goes once, straight between the ranks'
// own buffers, by cross-memory attach (process_vm_readv / process_vm_writev), as Open MPI's vader BTL does.
// The segment carries only the handshake: every rank publishes where its buffers are, the ranks move the
// bytes, and nobody returns before every peer is done with its buffers.
//
// The kernel refuses CMA where ptrace would be refused (Yama ptrace_scope >= 1 between unrelated processes)
// and seccomp profiles often forbid the calls (containers); the ranks then keep the staged path. They find
// out once, at start-up (agree()), and all take the same path.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/shm/arena.h"

namespace spmd::shm {

// The defaults where the ranks do not time the two paths at start-up (crossover.h says where they do), and
// the fallback where single copy loses at every size they time.
// From this many bytes per pair of ranks an op moves single-copy. Below it the staged path won on a 2-core EPYC
// VM: CMA pins the pages of every call, reads its source from memory where the staged chunks stay in cache,
// and the handshake adds two rounds of flags (load 11-16 from other builds; all_to_all and gather,
// SPMD_SHM_SINGLE_COPY=0 against the default, alternating, median of 7 rounds): at W=2 single copy won from
// 512 KiB (all_to_all 1.4x, gather even); at W=4 it lost at 256 and 512 KiB (0.66-0.91x) and won at 1 MiB
// (1.36-1.38x). On an Intel Xeon VM, where handing modified cache lines between the vCPUs costs 3x as much,
// it won from 128 KiB at W=2 (docs/PERFORMANCE.md, "One answer per row"): hence the timing.
inline constexpr size_t kSingleCopyFromBytes = 1024 * 1024;

// Broadcast and all_gather, where W-1 peers read each source, move single-copy only up to this many ranks.
// Staged, a source crosses memory once into a slot and its readers copy it out of cache; single-copy, every
// reader pulls it from memory again. At W=4 single copy lost: broadcast 0.6-0.95x from 1 to 64 MiB,
// all_gather 0.52-0.78x from 1 to 16 MiB; at W=2 all_gather won 1.06x at 1 MiB, 2-3.5x at 4 and 16 MiB.
inline constexpr int kSingleCopyFanOutRanks = 2;
// A broadcast at W=2 on EPYC lost or tied at 1 MiB (0.31-1.0x) and won from 4 MiB (4.3x at 4 MiB, 6-7x at 16
// to 256 MiB in 3 of 4 runs, 0.93x in one), so untimed it moves single-copy from here.
inline constexpr size_t kSingleCopyBroadcastFromBytes = 4 * 1024 * 1024;

// Allreduce and reduce_scatter at this many ranks may pull what each rank reduces straight from its peer's input
// and fold it in the rank's own memory. Staged, each chunk's modified cache lines cross between the ranks' caches
// four times (in, the peer's fold, back, out); where the two CPUs share no cache that dominates, and from one run to
// the next the EPYC VM put its two vCPUs either way (a cache line's round trip 60-90 or 300-340 ns): a 1 MiB allreduce took
// 64-79 us staged near and 244-683 apart, pulled 119-202 and 121-158, Open MPI's 149-818 (docs/PERFORMANCE.md,
// "Reductions where the cores share no cache"). So the start-up times both (crossover.h, kReduceTimedSizes).
// Beyond two ranks each would pull W-1 whole inputs.
inline constexpr int kSingleCopyReduceRanks = 2;
// The most of a peer's input one pull brings in: each lane keeps a scratch buffer this large at most.
inline constexpr size_t kSingleCopyReduceChunkBytes = 4 * 1024 * 1024;
// From this many bytes a pulled allreduce runs as a pulled reduce_scatter into each rank's stretch of the output and
// then pulls the peer's reduced stretch: each rank reads and folds half the input instead of both inputs whole, for
// one handshake more. On the EPYC VM's far cores (builds alternating, W = 2, under 4 x `yes`, fastest iteration) it
// won from 4 MiB (695 against 772 us; 64 MiB 45 against 62 ms, 256 MiB 158 against 253 by the mean) and lost below
// (1 MiB 315 against 262 us, 256 KiB 91 against 73), where the handshake costs more than the reads it saves.
inline constexpr size_t kSingleCopyReduceSplitBytes = 4 * 1024 * 1024;

// From how many bytes per pair of ranks blocks move single-copy (SIZE_MAX: never), as every rank of a
// segment agreed at start-up, and how the ranks came by the numbers (for copyPath).
struct SingleCopyFrom {
  size_t blocks = SIZE_MAX;     // all_to_all(v), gather, scatter, all_gather, the channels' hand-offs
  size_t broadcast = SIZE_MAX;  // broadcast (SIZE_MAX also where it always stages)
  std::string how;
  size_t reductions = SIZE_MAX;  // allreduce and reduce_scatter, by a rank's input bytes (kSingleCopyReduceRanks only)
};

// How long agree() may wait at connect(), which the ranks call right after they all attached: one that has
// not arrived by then is stuck. Every backend with a segment agrees under it (shm, shm+tcp).
inline constexpr std::chrono::seconds kAgreeWithin{60};

// Why this process cannot read the memory of another process of its user that is not its descendant, as
// ranks are to each other ("" when it can): a child it forks tries to read it. For `runner info`.
std::string singleCopyRefusal();

// How a backend with a segment says which path its large messages take (Backend::copyPath): `staged` is
// why they stage, "" where the ranks agreed on single copy from `from`.
std::string describeCopyPath(const std::string& staged, const SingleCopyFrom& from);

// Moves `bytes` between this process's `local` and process `pid`'s `remote` (`pull`: from there to here),
// in as many calls as the kernel needs. Throws CommError naming rank `peer` when the kernel refuses.
void moveAll(bool pull, int32_t pid, char* local, uint64_t remote, size_t bytes, int peer);

class SingleCopy {
 public:
  // Moves on `arena`'s lane; peers' pids come from the segment's doorbells.
  SingleCopy(const Segment& seg, Arena& arena);

  // Collective, once at start-up on one lane: every rank reads a word of every peer's memory by CMA. ""
  // when every rank can, else why not (the same text on every rank). `allowed`: false when this rank was
  // told to stage (SPMD_SHM_SINGLE_COPY=0), which stages every rank.
  std::string agree(bool allowed);

  // Rank `me` publishes shared(j), the stretch of its buffers peer j moves to or from, and moves between
  // its own local(j) and peer j's shared(me): `pull` reads peer j's into local(j), else it writes local(j)
  // into peer j's. Returns false, on every rank alike, when some rank's buffers overlap so that peers would
  // read what it overwrites (an in-place all_to_all): the caller stages that op. `stream`: the rank's own block,
  // which it copies itself, goes with non-temporal stores (the op's data is past the cache, and a copy that
  // misses it costs a third less memory traffic so: kernels/cpu/stream_copy.h).
  template <class Shared, class Local>
  bool move(bool pull, Shared shared, Local local, const char* what, bool stream = false) {
    for (int j = 0; j < arena_.size(); ++j) {
      shared_[size_t(j)] = shared(j);
      local_[size_t(j)] = local(j);
    }
    return moveRegions(pull, what, stream);
  }

 private:
  bool moveRegions(bool pull, const char* what, bool stream);
  bool overlapsOwn() const;
  std::string probePeers() const;

  const Segment& seg_;
  Arena& arena_;
  uint64_t nonce_;  // a word of this process's own memory, the one its peers probe
  std::vector<Region> shared_, local_;
};

}  // namespace spmd::shm
