// The shm backend's collectives: the "shared" algorithms, which stage chunks in each rank's slots of the
// segment and let peers reduce and copy straight out of them (one copy in, one copy out, no per-pair
// channel), plus every transport algorithm for the ops and names they do not cover. Where the ranks agreed
// on single copy (single_copy.h), the ops that only move bytes move large blocks once, buffer to buffer.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "backends/shm/arena.h"
#include "backends/shm/single_copy.h"
#include "runtime/transport_collectives.h"

namespace spmd::shm {

class SharedCollectives : public TransportCollectives {
 public:
  // `streamAbove`: the bytes of an op's inputs and outputs over all ranks beyond which its output will not
  // stay cached until read again, so copies into it stream past the cache (kernels/cpu/stream_copy.h);
  // 0: the last-level cache's size.
  SharedCollectives(const Segment& seg, ShmTransport& t, int lane, std::function<void(const std::string&)> onAbort,
                    size_t streamAbove = 0);
  Algo resolve(OpKind kind, Algo requested, size_t bytes) const override;
  // Collective, once at start-up on one lane (ShmBackend::connect): "" when every rank may move single-copy.
  std::string agreeSingleCopy(bool allowed) { return singleCopy_.agree(allowed); }
  // Moves blocks of `from.blocks` bytes and more single-copy from now on, and broadcasts from `from.broadcast`;
  // every rank's lanes alike.
  void useSingleCopy(const SingleCopyFrom& from) { from_ = {from.blocks, from.broadcast, "", from.reductions}; }

  void allreduce(const void* in, void* out, size_t count, DType dt, RedOp op, Algo a) override;
  void reduceScatter(const void* in, void* out, size_t count, DType dt, RedOp op, Algo a) override;
  void allGather(const void* in, void* out, size_t bytes, Algo a) override;
  void gather(const void* in, void* out, size_t bytes, int root, Algo a) override;
  void broadcast(void* data, size_t bytes, int root, Algo a) override;
  void scatter(const void* in, void* out, size_t count, size_t esize, int root, Algo a) override;
  void allToAll(const void* in, void* out, size_t count, size_t esize, Algo a) override;
  void allToAllv(const void* in, void* out, const AllToAllvCounts& c, size_t esize, Algo a) override;
  // Shared: every rank counts its arrival in its phase and rank 0, once all have, releases them; auto picks it
  // where the host's ranks outnumber its CPUs (shared_collectives.cc says why), else the dissemination barrier.
  void barrier(Algo a) override;

 private:
  bool streams(size_t inBytes, size_t outBytes) const;
  // Whether blocks of `bytes` between each pair of ranks move single-copy (the same answer on every rank).
  bool singleCopies(size_t bytes) const { return bytes >= from_.blocks; }
  // Whether an allreduce or reduce_scatter of `inBytes` per rank pulls from the peer: the same answer on every rank
  // where the buffers are the runner's (apart, or the output over this rank's own block of the input, `own`). An
  // output over any other part of the input would be overwritten before the peer pulled it in a later chunk.
  bool pullsReduction(const void* in, size_t inBytes, const void* out, const void* own, size_t outBytes) const;
  // The pulled reduction (single_copy.h): rank r's out[i] = every rank's in[at(r) + i] folded, i < count(r); an
  // allreduce's count and at are the same for every rank, a reduce_scatter's give each rank its block.
  template <class Count, class At>
  void pullAndFold(const void* in, void* out, DType dt, RedOp op, Count count, At at);
  // The allreduce by pullAndFold: whole, or from kSingleCopyReduceSplitBytes as a reduce_scatter and an all_gather.
  void pulledAllreduce(const void* in, void* out, size_t count, DType dt, RedOp op);
  // The all-to-alls' exchange: send(j) and recv(j) give where rank j's block is in the input and in the
  // output, and its bytes (shared_collectives.cc).
  template <class Send, class Recv>
  void exchangeBlocks(size_t largest, bool stream, const char* writing, const char* reading, Send send, Recv recv);

  Arena arena_;
  SingleCopy singleCopy_;
  SingleCopyFrom from_;  // staged until useSingleCopy
  std::vector<char> scratch_;  // a pulled reduction's chunk of the peer's input
  std::vector<const void*> xs_;  // each rank's operand of one fold, kept so that folding allocates nothing
  size_t streamAbove_;
  bool releaseBarrier_;  // auto's barrier is the shared one: the same answer on every rank of the host
};

}  // namespace spmd::shm
