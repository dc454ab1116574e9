// Where single copy starts to beat the staged path, found by timing both at start-up rather than fixed:
// the crossover moves with the machine and with where the hypervisor places the vCPUs. A staged copy hands
// modified cache lines from the writer's CPU to the reader's, and that handoff costs 3x as much in one
// placement as in another (bench/handoff.c; docs/PERFORMANCE.md, "One answer per row"): on an EPYC VM staged
// won up to 512 KiB per pair of ranks, on a Xeon VM single copy won from 128 KiB at W=2.
#pragma once
#include <cstddef>
#include <iterator>

#include "backends/shm/shared_collectives.h"

namespace spmd::shm {

// The sizes timed, per pair of ranks. Above the largest the defaults of single_copy.h hold: where single
// copy loses even there, it moves from kSingleCopyFromBytes (and broadcasts from
// kSingleCopyBroadcastFromBytes), as measured on the machines where staged won longest.
inline constexpr size_t kTimedSizes[] = {16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10};
// Timed only where every rank has a CPU of its own (waiting ranks that share one time the scheduler, not the
// copies) and at most this many ranks, so that start-up stays within a few milliseconds.
inline constexpr int kTimedRanksAtMost = 4;

// Collective on lane `c` of every rank of the segment, once, after agree() found that all may move
// single-copy: each rank times a staged and a single-copy all_to_all (and at W <= kSingleCopyFanOutRanks a
// broadcast) at every timed size, alternating, and keeps its best of a few rounds; the ranks take the
// slowest rank's time of each (an allreduce, max), so every rank computes the same thresholds. Leaves `c`
// staged: the caller hands the answer to every lane.
SingleCopyFrom timeSingleCopy(SharedCollectives& c);

}  // namespace spmd::shm
