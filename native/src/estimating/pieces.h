// Pipelining an estimating op's step in pieces (quantized_allreduce.h, compressed_allreduce.h): a helper
// thread runs the computations on pieces while the lane's thread moves the pieces already computed, so the
// wire and the CPU work at once. Where the link is slow the lane's thread mostly waits in the kernel, so the
// two threads share a core well.
#pragma once
#include <cstddef>
#include <functional>

#include "base/lane_worker.h"

namespace spmd {

// Runs a chain, piece by piece: compute(0, k), move(0, k), compute(1, k), ..., move(moves - 1, k),
// compute(moves, k) for k = 0 .. pieces - 1. The moves run on this thread, in an order every rank shares
// (skewed: move s of piece k in round k + s); the computations on `helper` in posting order (so each one
// sees the computations on earlier pieces done), or on this thread where it is null. Returns once every
// computation ran; whatever throws, the helper is done with the step's buffers before this returns.
void runInPieces(LaneWorker* helper, size_t pieces, int moves, const std::function<void(int, size_t)>& compute,
                 const std::function<void(int, size_t)>& move);

}  // namespace spmd
