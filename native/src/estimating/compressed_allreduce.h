// The 1-bit compressed allreduce with error feedback (DESIGN.md, Stages, compressed_allreduce steps 1-4),
// after DeepSpeed's NcclBackend/HcclBackend.compressed_allreduce. It is written once over the Collectives
// interface (allToAll, allGather), so every backend that offers those runs it without a copy of its own.
//
// The op holds one stage's state, which persists across steps: the worker error (P elements) and the
// server error (P/W), P = count rounded up to a multiple of 8W so every rank's chunk is whole bytes.
//
// Types: float32, float16 and bfloat16 tensors are computed in float32 (halves are widened on the way in
// and rounded on the way out), float64 in float64; the errors and scales have the compute type.
//
// Its buffers live in the lane's memory (kernels/memory.h) and its kernels run there: on a GPU the whole op stays
// on the device.
//
// Each phase moves one message per peer: a chunk's packed signs travel with the sender's scale appended (a
// record), so the all-to-all of step 2 also delivers the scales the design all-gathers, and step 4 all-gathers
// records: two collectives a step, not the design's four.
//
// On the host the op keeps x and c in place of the errors and settles them a step late, in the pass that
// reads them, packing signs in the same pass; where a pipeline pays, each phase runs in pieces of every chunk
// (estimating/pieces.h), the signs of each piece travelling while the pass goes on and the scale with the
// last piece. The wire carries the same bytes, and the bits are the device form's, whatever the pieces.
#pragma once
#include <cstddef>
#include <memory>

#include "estimating/estimating_op.h"
#include "kernels/memory.h"

namespace spmd {

// The compressed_allreduce stage's settings.
struct OneBitSpec {
  int resetEvery = 0;        // > 0: both errors zeroed before every resetEvery-th step
  size_t pieceValues = 0;    // elements of each rank's chunk per pipelined piece; 0: the op's default
  bool acrossHosts = false;  // the ranks run on several hosts: a link worth overlapping, by default
};

// One step: out (count elements of the tensor's dtype) <- the estimate of the mean of `in` over ranks; the
// op sends records to W-1 peers in each of its two phases. Its state: "worker_error" and "server_error".
// spec.resetEvery counts steps from the first warmup step. `in` and `out` point into `memory`. Throws
// CommError(kInvalid) for integer dtypes, and what memory.kernels() throws where there are no kernels.
std::unique_ptr<EstimatingOp> makeCompressedAllreduce(Memory& memory, int rank, int worldSize, size_t count, DType dt,
                                                      const OneBitSpec& spec);

}  // namespace spmd
