#include "backends/shm/shared_collectives.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "algorithms/buffers.h"
#include "base/cache.h"
#include "base/cores.h"
#include "base/partition.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/stream_copy.h"

namespace spmd::shm {
namespace {

using algo::detail::bytes;
using algo::detail::copyBytes;
using kernels::copyOut;

// Up to this size every rank reduces the whole message itself: one step instead of three, and the
// latency of small allreduces is one round of flags.
constexpr size_t kReduceEverywhereBytes = 8 * 1024;

// x_0 op x_1 op ... op x_{W-1}, always left to right, so the bits do not depend on which rank computes
// them. dst may alias x_0 or x_1 only.
void foldRanks(DType dt, RedOp op, void* dst, const std::vector<const void*>& xs, size_t count) {
  if (count == 0) return;
  if (xs.size() == 1) return copyBytes(dst, xs[0], count * elementSize(dt));
  kernels::reduce3(dt, op, dst, xs[0], xs[1], count);
  for (size_t j = 2; j < xs.size(); ++j) kernels::reduceInto(dt, op, dst, xs[j], count);
}

// f(j) for every peer j, starting after `me`: the ranks start on different peers, so no slot is every
// rank's first read.
template <class F>
void forEachPeer(int me, int W, F f) {
  for (int k = 1; k < W; ++k) f((me + k) % W);
}

bool overlaps(const void* a, size_t an, const void* b, size_t bn) {
  return an != 0 && bn != 0 && bytes(a) < bytes(b) + bn && bytes(b) < bytes(a) + an;
}

bool overlaps(const void* a, const void* b, size_t n) { return overlaps(a, n, b, n); }

// The slot split into one piece per rank, each on its own cache lines where the slot allows it, and a whole
// number of `unit`s (an element; 1 where the op moves bytes). A message of any size moves piece by piece.
size_t pieceSize(size_t slotBytes, int W, size_t unit) {
  const size_t share = slotBytes / size_t(W), n = share >= 64 ? share / 64 * 64 / unit : share / unit;
  if (n == 0) throw CommError(code::kInvalid, "shm: slots of " + std::to_string(slotBytes) + " bytes cannot hold a " + std::to_string(unit) + "-byte element for each of " + std::to_string(W) + " ranks");
  return n;
}

size_t piece(size_t total, size_t step, size_t per) { return total > step * per ? std::min(per, total - step * per) : 0; }

}  // namespace

SharedCollectives::SharedCollectives(const Segment& seg, ShmTransport& t, int lane,
                                     std::function<void(const std::string&)> onAbort, size_t streamAbove)
    : TransportCollectives(t, std::move(onAbort)), arena_(seg, t, lane), singleCopy_(seg, arena_), xs_(size_t(seg.worldSize())),
      streamAbove_(streamAbove ? streamAbove : lastLevelCacheBytes()),
      releaseBarrier_(unsigned(seg.worldSize()) > onlineCores()) {}

bool SharedCollectives::streams(size_t inBytes, size_t outBytes) const {
  return size_t(size()) * (inBytes + outBytes) > streamAbove_;
}

Algo SharedCollectives::resolve(OpKind kind, Algo requested, size_t bytes) const {
  switch (kind) {
    case OpKind::AllReduce: case OpKind::ReduceScatter: case OpKind::AllGather: case OpKind::Gather:
    case OpKind::Broadcast: case OpKind::AllToAll: case OpKind::AllToAllv:
      if (requested == Algo::Auto || requested == Algo::Shared) return Algo::Shared;
      break;
    case OpKind::Barrier:
      if (requested == Algo::Shared || (requested == Algo::Auto && releaseBarrier_)) return Algo::Shared;
      break;
    case OpKind::Scatter:  // staged by the transport algorithms; shared only where it moves single-copy
      if ((requested == Algo::Auto || requested == Algo::Shared) && singleCopies(bytes / size_t(size()))) return Algo::Shared;
      [[fallthrough]];
    default:
      if (requested == Algo::Shared) {
        throw CommError(code::kUnsupported, "the shm backend has no shared " + std::string(opKindName(kind)));
      }
      break;
  }
  return TransportCollectives::resolve(kind, requested, bytes);
}

bool SharedCollectives::pullsReduction(const void* in, size_t inBytes, const void* out, const void* own, size_t outBytes) const {
  return size() == kSingleCopyReduceRanks && inBytes >= from_.reductions && (out == own || !overlaps(in, inBytes, out, outBytes));
}

template <class Count, class At>
void SharedCollectives::pullAndFold(const void* in, void* out, DType dt, RedOp op, Count count, At at) {
  const int me = rank(), peer = 1 - me;
  const size_t es = elementSize(dt), per = kSingleCopyReduceChunkBytes / es, most = std::max(count(0), count(1));
  // Grown, never shrunk: a resize up within the capacity would zero the new part on every call that follows a smaller one.
  scratch_.resize(std::max(scratch_.size(), std::min(most, per) * es));
  // As many chunks on every rank: the larger block's.
  for (size_t k = 0; k * per < most; ++k) {
    const auto chunk = [&](int j) { return region(bytes(in) + (at(j) + k * per) * es, piece(count(j), k, per) * es); };
    // Never staged: the pulled side is this lane's scratch, which no rank's buffers overlap.
    singleCopy_.move(true, [&](int j) { return j == me ? Region{} : chunk(j); },
                     [&](int j) { return j == me ? Region{} : region(scratch_.data(), piece(count(me), k, per) * es); }, "a pulled reduction");
    xs_[size_t(me)] = bytes(in) + (at(me) + k * per) * es;
    xs_[size_t(peer)] = scratch_.data();
    // Every peer is done reading this chunk of the input, so an output over it may be written.
    foldRanks(dt, op, bytes(out) + k * per * es, xs_, piece(count(me), k, per));
  }
}

void SharedCollectives::pulledAllreduce(const void* in, void* out, size_t count, DType dt, RedOp op) {
  const int me = rank();
  const size_t es = elementSize(dt);
  if (count * es < kSingleCopyReduceSplitBytes) return pullAndFold(in, out, dt, op, [count](int) { return count; }, [](int) { return size_t(0); });
  const Partition p{count, size()};
  const auto stretch = [&](int j) { return region(bytes(out) + p.offset(j) * es, p.count(j) * es); };
  pullAndFold(in, bytes(out) + p.offset(me) * es, dt, op, [&p](int j) { return p.count(j); }, [&p](int j) { return p.offset(j); });
  // Never staged: the stretches are disjoint on every rank.
  singleCopy_.move(true, [&](int j) { return j == me ? Region{} : stretch(me); }, [&](int j) { return j == me ? Region{} : stretch(j); },
                   "a pulled allreduce (the reduced stretches)");
}

void SharedCollectives::allreduce(const void* in, void* out, size_t count, DType dt, RedOp op, Algo a) {
  if (resolve(OpKind::AllReduce, a, 0) != Algo::Shared) return TransportCollectives::allreduce(in, out, count, dt, op, a);
  const int W = size(), me = rank();
  const size_t es = elementSize(dt), chunk = arena_.slotBytes() / es;
  if (pullsReduction(in, count * es, out, in, count * es)) return pulledAllreduce(in, out, count, dt, op);
  const bool everywhere = count * es <= kReduceEverywhereBytes, stream = streams(count * es, count * es);
  for (size_t at = 0; at < count; at += chunk) {
    const size_t m = std::min(chunk, count - at);
    const char* src = bytes(in) + at * es;
    char* dst = bytes(out) + at * es;
    arena_.begin(true, "a shared allreduce (writing its slot)");
    if (everywhere) {
      copyBytes(arena_.mine(), src, m * es);
      arena_.step();
      arena_.awaitAll("a shared allreduce (the inputs)");
      for (int j = 0; j < W; ++j) xs_[size_t(j)] = arena_.of(j);
      foldRanks(dt, op, dst, xs_, m);
      arena_.step();
      arena_.end();
      continue;
    }
    // Rank j reduces piece j of the chunk out of every slot, then everyone copies the reduced pieces out.
    // Its own piece comes from its input, unless the output overwrites that input as it is folded.
    const Partition p{m, W};
    const bool inPlace = overlaps(src, dst, m * es);
    char* slot = arena_.mine();
    copyBytes(slot, src, (inPlace ? p.offset(me + 1) : p.offset(me)) * es);
    copyBytes(slot + p.offset(me + 1) * es, src + p.offset(me + 1) * es, (m - p.offset(me + 1)) * es);
    arena_.step();
    arena_.awaitAll("a shared allreduce (the inputs)");
    const size_t mine = p.offset(me) * es;
    for (int j = 0; j < W; ++j) xs_[size_t(j)] = j == me && !inPlace ? src + mine : arena_.of(j) + mine;
    if (inPlace) {  // the own piece's input sits in the slot, so the fold goes to the output first
      foldRanks(dt, op, dst + mine, xs_, p.count(me));
      copyBytes(slot + mine, dst + mine, p.count(me) * es);
    } else {
      foldRanks(dt, op, slot + mine, xs_, p.count(me));
      copyOut(stream, dst + mine, slot + mine, p.count(me) * es);
    }
    arena_.step();
    arena_.awaitAll("a shared allreduce (the reduced pieces)");
    forEachPeer(me, W, [&](int j) { copyOut(stream, dst + p.offset(j) * es, arena_.of(j) + p.offset(j) * es, p.count(j) * es); });
    arena_.step();
    arena_.end();
  }
}

void SharedCollectives::reduceScatter(const void* in, void* out, size_t count, DType dt, RedOp op, Algo a) {
  if (resolve(OpKind::ReduceScatter, a, 0) != Algo::Shared) return TransportCollectives::reduceScatter(in, out, count, dt, op, a);
  const int W = size(), me = rank();
  const size_t es = elementSize(dt);
  const Partition p{count, W};
  const size_t per = pieceSize(arena_.slotBytes(), W, es);
  const bool inPlace = overlaps(bytes(in) + p.offset(me) * es, out, p.count(me) * es);
  if (pullsReduction(in, count * es, out, bytes(in) + p.offset(me) * es, p.count(me) * es)) {
    return pullAndFold(in, out, dt, op, [&p](int j) { return p.count(j); }, [&p](int j) { return p.offset(j); });
  }
  const bool stream = !inPlace && streams(count * es, p.block() * es);
  // Step s moves the s-th piece of every rank's block: each rank writes the pieces the others reduce and
  // folds its own block's piece out of every slot.
  for (size_t s = 0; s * per < p.block(); ++s) {
    arena_.begin(true, "a shared reduce_scatter (writing its slot)");
    char* slot = arena_.mine();
    for (int j = 0; j < W; ++j) {
      if (j != me || inPlace) copyBytes(slot + size_t(j) * per * es, bytes(in) + (p.offset(j) + s * per) * es, piece(p.count(j), s, per) * es);
    }
    arena_.step();
    arena_.awaitAll("a shared reduce_scatter (the inputs)");
    const size_t from = size_t(me) * per * es;
    for (int j = 0; j < W; ++j) {
      xs_[size_t(j)] = j == me && !inPlace ? bytes(in) + (p.offset(me) + s * per) * es : arena_.of(j) + from;
    }
    const size_t n = piece(p.count(me), s, per);
    if (stream) {  // the own piece's part of the slot is free: fold there, stream the result out
      foldRanks(dt, op, slot + from, xs_, n);
      copyOut(true, bytes(out) + s * per * es, slot + from, n * es);
    } else {
      foldRanks(dt, op, bytes(out) + s * per * es, xs_, n);
    }
    arena_.step();
    arena_.end();
  }
}

void SharedCollectives::allGather(const void* in, void* out, size_t n, Algo a) {
  if (resolve(OpKind::AllGather, a, 0) != Algo::Shared) return TransportCollectives::allGather(in, out, n, a);
  if (size() <= kSingleCopyFanOutRanks && singleCopies(n) &&
      singleCopy_.move(true, [&](int) { return region(in, n); }, [&](int j) { return region(bytes(out) + size_t(j) * n, n); },
                       "a single-copy all_gather", streams(n, size_t(size()) * n))) {
    return;
  }
  const int W = size(), me = rank();
  const size_t chunk = arena_.slotBytes();
  const bool stream = streams(n, size_t(W) * n);
  for (size_t at = 0; at < n; at += chunk) {
    const size_t m = std::min(chunk, n - at);
    arena_.begin(true, "a shared all_gather (writing its slot)");
    copyBytes(arena_.mine(), bytes(in) + at, m);
    arena_.step();
    copyOut(stream, bytes(out) + size_t(me) * n + at, bytes(in) + at, m);  // while the others write theirs
    arena_.awaitAll("a shared all_gather (the inputs)");
    forEachPeer(me, W, [&](int j) { copyOut(stream, bytes(out) + size_t(j) * n + at, arena_.of(j), m); });
    arena_.step();
    arena_.end();
  }
}

void SharedCollectives::gather(const void* in, void* out, size_t n, int root, Algo a) {
  if (resolve(OpKind::Gather, a, 0) != Algo::Shared) return TransportCollectives::gather(in, out, n, root, a);
  const int W = size(), me = rank();
  // Each rank writes its block into the root's output: the copies run on every rank's core at once.
  if (singleCopies(n) &&
      singleCopy_.move(false, [&](int j) { return me == root ? region(bytes(out) + size_t(j) * n, n) : Region{}; },
                       [&](int j) { return j == root ? region(in, n) : Region{}; }, "a single-copy gather", streams(n, n))) {
    return;
  }
  const size_t chunk = arena_.slotBytes();
  const bool stream = streams(n, n);  // the root's W * n output, the others' n inputs
  for (size_t at = 0; at < n; at += chunk) {
    const size_t m = std::min(chunk, n - at);
    arena_.begin(me != root, "a shared gather (writing its slot)");
    if (me != root) {
      copyBytes(arena_.mine(), bytes(in) + at, m);
      arena_.step();
      arena_.step();  // nothing to read: the root frees the slot when it has read it
      arena_.end();
      continue;
    }
    arena_.step();
    copyOut(stream, bytes(out) + size_t(me) * n + at, bytes(in) + at, m);
    arena_.awaitAll("a shared gather (the inputs)");
    for (int j = 0; j < W; ++j) {
      if (j != me) copyOut(stream, bytes(out) + size_t(j) * n + at, arena_.of(j), m);
    }
    arena_.step();
    arena_.end();
  }
}

void SharedCollectives::broadcast(void* data, size_t n, int root, Algo a) {
  if (resolve(OpKind::Broadcast, a, 0) != Algo::Shared) return TransportCollectives::broadcast(data, n, root, a);
  const int me = rank();
  // Single copy at W = 2: the root writes the second half into its peer's buffer (process_vm_writev) while the
  // peer pulls the first, so neither idles while the other copies; each publishes the half the other moves.
  const Region first = region(data, n / 2), second = region(bytes(data) + n / 2, n - n / 2);
  const auto half = [&](bool published) { return [&, published](int j) { return j == me ? Region{} : (me == root) == published ? first : second; }; };
  if (size() <= kSingleCopyFanOutRanks && n >= from_.broadcast && singleCopy_.move(me != root, half(true), half(false), "a single-copy broadcast")) {
    return;
  }
  const size_t chunk = arena_.slotBytes();
  const bool stream = streams(0, n);
  for (size_t at = 0; at < n; at += chunk) {
    const size_t m = std::min(chunk, n - at);
    arena_.begin(me == root, "a shared broadcast (writing its slot)");
    if (me == root) {
      copyBytes(arena_.mine(), bytes(data) + at, m);
      arena_.step();
      arena_.step();  // the root reads nothing; the readers free the slot as they finish
      arena_.end();
      continue;
    }
    arena_.step();
    arena_.awaitRank(root, "a shared broadcast (the root's data)");
    copyOut(stream, bytes(data) + at, arena_.of(root), m);
    arena_.step();
    arena_.end();
  }
}

// Where ranks outnumber cores, a waiting rank sleeps soon, and each of the dissemination barrier's log2(W)
// rounds may wait on a rank that is not running. Here every rank publishes its arrival once, and rank 0
// releases them all with one more step (the release/gather barrier of MPICH's and Open MPI's shared-memory
// collectives): W = 4 on 2 cores, 4 µs against 6 to 10. Rank 0 leaves first, the others as they wake, so an
// op from root 0 right after it finds its receivers later (8-byte broadcast 0.2 µs against 4) and a gather
// to root 0 waits longer for its senders (3.8 µs against 0.9-4.4). Where each rank has a core, the
// dissemination barrier lets the ranks leave together, which symmetric ops measured after it gain from (64
// KiB all_to_all at W = 2: 5.3 µs against 6.3).
void SharedCollectives::barrier(Algo a) {
  if (resolve(OpKind::Barrier, a, 0) != Algo::Shared) return TransportCollectives::barrier(a);
  arena_.step();  // arrived
  if (rank() == 0) {
    arena_.awaitAll("a shared barrier (the arrivals)");
    arena_.step();  // released
    return;
  }
  arena_.step();
  arena_.awaitRank(0, "a shared barrier (rank 0's release)");
}

// Every rank reads its block out of the root's input.
void SharedCollectives::scatter(const void* in, void* out, size_t count, size_t esize, int root, Algo a) {
  const int me = rank();
  const Partition p{count, size()};
  if (resolve(OpKind::Scatter, a, count * esize) == Algo::Shared &&
      singleCopy_.move(true, [&](int j) { return me == root ? region(bytes(in) + p.offset(j) * esize, p.count(j) * esize) : Region{}; },
                       [&](int j) { return j == root ? region(out, p.count(me) * esize) : Region{}; }, "a single-copy scatter")) {
    return;
  }
  TransportCollectives::scatter(in, out, count, esize, root, a);
}

// Piece s of the block for rank j goes to piece j of this rank's slot (its own block straight to the output);
// then each rank copies piece s of its block out of every peer's slot. `largest`: the bytes of the largest
// block of any pair, so that every rank takes the same number of steps.
template <class Send, class Recv>
void SharedCollectives::exchangeBlocks(size_t largest, bool stream, const char* writing, const char* reading, Send send, Recv recv) {
  const int W = size(), me = rank();
  const size_t per = pieceSize(arena_.slotBytes(), W, 1);
  for (size_t s = 0; s * per < largest; ++s) {
    arena_.begin(true, writing);
    char* slot = arena_.mine();
    for (int j = 0; j < W; ++j) {
      const auto [from, n] = send(j);
      copyOut(stream && j == me, j == me ? recv(me).first + s * per : slot + size_t(j) * per, from + s * per, piece(n, s, per));
    }
    arena_.step();
    arena_.awaitAll(reading);
    forEachPeer(me, W, [&](int j) {
      const auto [to, n] = recv(j);
      copyOut(stream, to + s * per, arena_.of(j) + size_t(me) * per, piece(n, s, per));
    });
    arena_.step();
    arena_.end();
  }
}

void SharedCollectives::allToAll(const void* in, void* out, size_t count, size_t esize, Algo a) {
  if (resolve(OpKind::AllToAll, a, 0) != Algo::Shared) return TransportCollectives::allToAll(in, out, count, esize, a);
  // In bytes: a record (esize) may be larger than a rank's share of a slot (the 1-bit allreduce's packed
  // chunks are), so pieces cut through records.
  const Partition p{count, size()};
  const size_t mine = p.count(rank()) * esize;
  if (singleCopies(p.block() * esize) &&
      singleCopy_.move(true, [&](int j) { return region(bytes(in) + p.offset(j) * esize, p.count(j) * esize); },
                       [&](int j) { return region(bytes(out) + size_t(j) * mine, mine); }, "a single-copy all_to_all",
                       streams(count * esize, size_t(size()) * mine))) {
    return;
  }
  exchangeBlocks(
      p.block() * esize, streams(count * esize, size_t(size()) * mine), "a shared all_to_all (writing its slot)",
      "a shared all_to_all (the inputs)", [&](int j) { return std::pair(bytes(in) + p.offset(j) * esize, p.count(j) * esize); },
      [&](int j) { return std::pair(bytes(out) + size_t(j) * mine, mine); });
}

void SharedCollectives::allToAllv(const void* in, void* out, const AllToAllvCounts& c, size_t esize, Algo a) {
  if (resolve(OpKind::AllToAllv, a, 0) != Algo::Shared) return TransportCollectives::allToAllv(in, out, c, esize, a);
  const auto at = [esize](const void* base, const std::vector<size_t>& offsets, const std::vector<size_t>& counts, int j) {
    return region(bytes(base) + offsets[size_t(j)] * esize, counts[size_t(j)] * esize);
  };
  if (singleCopies(c.largestBlock * esize) &&
      singleCopy_.move(true, [&](int j) { return at(in, c.sendOffsets, c.sendCounts, j); },
                       [&](int j) { return at(out, c.recvOffsets, c.recvCounts, j); }, "a single-copy all_to_allv",
                       streams(c.sent() * esize, c.received() * esize))) {
    return;
  }
  exchangeBlocks(
      c.largestBlock * esize, streams(c.sent() * esize, c.received() * esize), "a shared all_to_allv (writing its slot)",
      "a shared all_to_allv (the inputs)",
      [&](int j) { return std::pair(bytes(in) + c.sendOffsets[size_t(j)] * esize, c.sendCounts[size_t(j)] * esize); },
      [&](int j) { return std::pair(bytes(out) + c.recvOffsets[size_t(j)] * esize, c.recvCounts[size_t(j)] * esize); });
}

}  // namespace spmd::shm
