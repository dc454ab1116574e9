// The quantized allreduce, ZeRO++'s qgZ (DESIGN.md, Stages, quantized_allreduce; after DeepSpeed's
// all_to_all_quant_reduce): a reduce-scatter whose data travels as int8 or int4 codes (kernels/cpu/quant.h)
// in two hierarchical all-to-alls, optionally followed by a quantized all-gather so that it stands in for
// an allreduce. Written once over Collectives and its sub-communicators (Collectives::split), so every
// backend that offers those runs it.
//
// Ranks form N nodes of L local ranks: node(r) is given per rank (the hosts the ranks really run on,
// whatever their numbering), or r / L (ranks numbered node by node, as a stage's `nodes`/`localSize`
// simulate); local(r) is r's index among its node's ranks, and (a, l) names the rank with node a and local
// index l. The tensor's n elements form W blocks of B = n/W; block j is bound for rank j. A step:
//  1. Quantize each block straight into the record for the local rank it is bound for (the design's
//     swizzle, at no cost): record l holds the blocks bound for (0, l), (1, l), ..., one per node.
//  2. All-to-all the records among the node's L ranks. Rank (a, l) now holds, from every local rank, the
//     blocks bound for the ranks of local index l: it sums the L copies of each (dequantized, in local
//     rank order) and requantizes the sums.
//  3. All-to-all among the N ranks of local index l: the block bound for (a', l) goes to node a'. Rank r dequantizes
//     and sums the N copies of block r (in node order): block r of the sum, divided by W for the mean.
//  4. "full" output only: quantize block r (gatherBits) and all-gather every rank's; every rank
//     dequantizes all W blocks and holds the same n values.
//
// On the host a step runs in pieces (whole groups of every block, the same bits whatever their size;
// estimating/pieces.h): a helper thread quantizes and dequantizes while the lane's thread moves the pieces
// already done. By default only where the ranks run on several hosts (nodeOf names more than one node); the
// stage's pieceGroups asks for pieces anywhere.
//
// Every quantization works in groups of groupSize within one block (a block's last group is short when
// groupSize does not divide B), and a block's record is its steps then its codes. The compute type is
// float32 whatever the tensor: inputs are rounded to float32 on the way in, outputs back to the tensor's
// dtype. With error feedback, each quantization keeps what it lost and adds beta times it to what it
// quantizes next step (LoCo's idea): "intra_error" (n values, indexed as the tensor), "inter_error" (N·B:
// the sums this rank requantizes, by node) and "gather_error" (B, full output only), which are the op's
// state. Its buffers live in the lane's memory (kernels/memory.h) and its kernels run there.
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

#include "estimating/estimating_op.h"
#include "kernels/memory.h"

namespace spmd {

// The quantized_allreduce stage's settings.
struct QuantizedSpec {
  int bits = 8;             // 4 or 8
  int gatherBits = 8;       // the all-gather's, for an allreduce
  size_t groupSize = 2048;  // values per quantization group; even
  int localSize = 1;        // ranks per node, numbered node by node; divides the world size
  std::vector<int> nodeOf;  // each rank's node, when given (then localSize is unused); every node holds as many ranks
  bool errorFeedback = false;
  float beta = 1;           // error feedback: the weight of the carried error
  size_t pieceGroups = 0;   // groups of each block per pipelined piece; 0: the op's default
};

// Collective over `world`, the lane it will run on: splits off the node's ranks and the ranks of this
// local index. `full`: every rank gets all n values (an allreduce), else block r (a reduce_scatter).
// Throws CommError(kInvalid) for integer dtypes, a local size that does not divide W, nodes of unequal
// sizes (the planner falls back to the exact collective for those first), or a count that is
// not a multiple of W (of 2W when int4 codes travel, so every block is whole bytes): the planner falls back
// to the exact collective for those counts before native code sees them. `world` moves pointers into `memory`.
std::unique_ptr<EstimatingOp> makeQuantizedAllreduce(Memory& memory, Collectives& world, size_t count, DType dt,
                                                     const QuantizedSpec& spec, bool full, bool mean);

}  // namespace spmd
