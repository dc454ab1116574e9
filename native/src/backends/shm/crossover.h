// Where single copy starts to beat the staged path, found by timing both at start-up rather than fixed:
// the crossover moves with the machine and with where the hypervisor places the vCPUs. A staged copy hands
// modified cache lines from the writer's CPU to the reader's, and that handoff costs 3x as much in one
// placement as in another (bench/handoff.c; docs/PERFORMANCE.md, "One answer per row"): on an EPYC VM staged
// won up to 512 KiB per pair of ranks, on a Xeon VM single copy won from 128 KiB at W=2.
#pragma once
#include <cstddef>
#include <iterator>
#include <span>

#include "backends/shm/shared_collectives.h"

namespace spmd::shm {

// The sizes timed, per pair of ranks. Above the largest the defaults of single_copy.h hold: where single
// copy loses even there, it moves from kSingleCopyFromBytes (and broadcasts from
// kSingleCopyBroadcastFromBytes), as measured on the machines where staged won longest.
inline constexpr size_t kTimedSizes[] = {16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10};
// The allreduces timed staged and pulled at W = kSingleCopyReduceRanks, by a rank's input; above the largest the
// answer at it holds, and reductions stage where pulling wins at none.
inline constexpr size_t kReduceTimedSizes[] = {256 << 10, 1 << 20};
// Timed only where every rank has a CPU of its own (waiting ranks that share one time the scheduler, not the
// copies) and at most this many ranks, so that start-up stays within a few milliseconds.
inline constexpr int kTimedRanksAtMost = 4;

// How much less time single copy must take over the timed sizes before the ranks leave the staged path for it.
// Where the two tie (an EPYC VM: totals within 1-3% of each other), a start-up's readings decided by chance,
// and launches of one job moved a 256 KiB block single-copy in 30 of 104 start-ups and staged in the rest,
// 27 against 18 us (docs/PERFORMANCE.md, "One answer per launch"); where single copy does win (a Xeon VM), it
// saves 10-40% from 128 KiB.
inline constexpr double kSwitchMargin = 0.05;
// The broadcast's margin. Where the cores share a cache, a loop of broadcasts at 32-256 KiB ran single copy about
// 2x faster (4.1 against 8.4 us at 64 KiB), but a job of mixed ops ran staged 2x faster (2.8 against 5.4): the
// start-up, which times a loop, put single copy 4-15% ahead and chose either way. Where they share none, single
// copy won 4-6x in both (docs/PERFORMANCE.md, "The start-up times what a job repeats").
inline constexpr double kBroadcastSwitchMargin = 0.2;

// The threshold under which the timed sizes take least time in all, staged below it and single-copy from it,
// given each path's seconds at every timed size; `otherwise` (above every timed size) where staging all of them
// does, or where no threshold saves `margin` (a fraction) of that. Summed over the sizes, one reading that a spell or
// an interrupt hit moves the answer only as far as its own weight: a rule that single copy must win at every
// larger size fell back to `otherwise` in 3 of 8 start-ups here on a 256 KiB reading 3% against it while it
// won by 10-20% below.
size_t crossover(std::span<const size_t> sizes, const double* staged, const double* single, size_t otherwise, double margin);

// Collective on lane `c` of every rank of the segment, once, after agree() found that all may move
// single-copy. Where any rank was told not to time (`timedCopyPath` false: SPMD_SHM_SINGLE_COPY=fixed), all keep the
// defaults of single_copy.h: a start-up's readings of a near tie move a row's path, and its time by up to 1.4x, from
// one launch of a job to the next, which campaigns compared for regressions must not see (docs/PERFORMANCE.md,
// "Pinned copy paths"). Otherwise each rank times a staged and a single-copy all_to_all (and at W <= kSingleCopyFanOutRanks a
// broadcast) at every timed size, and at W = kSingleCopyReduceRanks a staged and a pulled allreduce at every
// kReduceTimedSizes (the reductions' threshold by the same rule, SIZE_MAX where pulling wins at none), alternating,
// and keeps its best of a few rounds; the ranks take the
// slowest rank's time of each (an allreduce, max), so every rank computes the same thresholds. Leaves `c`
// staged: the caller hands the answer to every lane.
SingleCopyFrom timeSingleCopy(SharedCollectives& c, bool timedCopyPath);

}  // namespace spmd::shm
