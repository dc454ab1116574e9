// Collective algorithms written once over Transport (ring, tree = binomial/MST, direct, dissemination).
// Backends without a native collective library (shm, tcp) run these; MPI/NCCL map to their own calls.
//
// Conventions shared by every function here:
//  - Reductions see only F32, F64, I32 and I64 (the communicator widens float16/bfloat16 to float32 and
//    applies "mean" as sum followed by a division: algorithms/typed_ops.h).
//  - Block-wise collectives split `count` elements with Partition{count, W}; rank r owns block r.
//  - `in` and `out` may alias where noted; otherwise they must not overlap.
//  - Scratch comes from `ws`; nothing allocates once the workspace is large enough.
#pragma once
#include <cstddef>

#include "algorithms/group_transport.h"
#include "base/collectives.h"
#include "base/dtype.h"
#include "base/transport.h"
#include "base/workspace.h"

namespace spmd::algo {

// out[i] = op over ranks of in[i], on every rank. in == out allowed.
// The ring cuts each rank's block into slices of `sliceBytes` that stream through its steps (allreduce.cc);
// 0: one slice per block, each step whole.
inline constexpr size_t kRingSliceBytes = 1 << 20;
void allreduceRing(Transport& t, Workspace& ws, const void* in, void* out, size_t count, DType dt, RedOp op,
                   size_t sliceBytes = kRingSliceBytes);
void allreduceTree(Transport& t, Workspace& ws, const void* in, void* out, size_t count, DType dt, RedOp op);
void allreduceDirect(Transport& t, Workspace& ws, const void* in, void* out, size_t count, DType dt, RedOp op);
// In two levels (NCCL's and Horovod's hierarchical allreduce), over the ranks `g` groups (nodeGroups): the
// array is cut into pieces whose node blocks (Partition{piece, L}) are `sliceBytes` long, and each piece goes
// through a reduce-scatter among the L ranks of the node, the ring allreduce of this rank's block with the
// ranks of its local index on the H nodes, and an all-gather inside the node (hierarchical.cc).
void allreduceHierarchical(Transport& t, Workspace& ws, const NodeGroups& g, const void* in, void* out, size_t count,
                           DType dt, RedOp op, size_t sliceBytes = kRingSliceBytes);

// in: `count` elements on every rank; out: this rank's block of the reduction (Partition{count, W}).
void reduceScatterRing(Transport& t, Workspace& ws, const void* in, void* out, size_t count, DType dt, RedOp op);
void reduceScatterDirect(Transport& t, Workspace& ws, const void* in, void* out, size_t count, DType dt, RedOp op);

// in: `bytes` per rank; out: W * bytes, rank-major.
void allGatherRing(Transport& t, const void* in, void* out, size_t bytes);
void allGatherDirect(Transport& t, const void* in, void* out, size_t bytes);

// in: `bytes` per rank; out (root only, others may pass nullptr): W * bytes, rank-major.
void gatherDirect(Transport& t, const void* in, void* out, size_t bytes, int root);
void gatherTree(Transport& t, Workspace& ws, const void* in, void* out, size_t bytes, int root);

// data: `bytes` on every rank; root's content ends on every rank.
void broadcastTree(Transport& t, void* data, size_t bytes, int root);
void broadcastDirect(Transport& t, void* data, size_t bytes, int root);

// out (root only): op over ranks of in. in == out allowed on root.
void reduceTree(Transport& t, Workspace& ws, const void* in, void* out, size_t count, DType dt, RedOp op, int root);
void reduceDirect(Transport& t, Workspace& ws, const void* in, void* out, size_t count, DType dt, RedOp op, int root);

// in (root only): `count` elements of `esize` bytes; out: block r of Partition{count, W}.
void scatterTree(Transport& t, Workspace& ws, const void* in, void* out, size_t count, size_t esize, int root);
void scatterDirect(Transport& t, const void* in, void* out, size_t count, size_t esize, int root);

// in: `count` elements per rank, block j (Partition{count, W}) goes to rank j; out: W blocks of
// Partition{count, W}.count(r) elements, block j from rank j.
void allToAllDirect(Transport& t, const void* in, void* out, size_t count, size_t esize);
// in: c.sent() elements, the block for rank j at c.sendOffsets[j]; out: c.received(), the block from rank j
// at c.recvOffsets[j]. Empty blocks are no messages.
void allToAllvDirect(Transport& t, const void* in, void* out, const AllToAllvCounts& c, size_t esize);

// Send `bytes` to rank `to`, receive as many from `from`; both this rank: a copy.
void sendRecvPeers(Transport& t, const void* in, void* out, size_t bytes, int to, int from);
// Ring shift: send `bytes` to rank (r + shift) mod W, receive from (r - shift) mod W.
void sendRecvShift(Transport& t, const void* in, void* out, size_t bytes, int shift);

void barrierDissemination(Transport& t);

}  // namespace spmd::algo
