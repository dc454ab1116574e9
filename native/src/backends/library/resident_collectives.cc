#include "backends/library/resident_collectives.h"

#include "algorithms/ranks.h"
#include "base/partition.h"

namespace spmd::library {

Algo ResidentCollectives::resolve(OpKind kind, Algo requested, size_t bytes) const {
  if ((kind == OpKind::Gather || kind == OpKind::Scatter) && requested == Algo::Auto) return Algo::Direct;
  const Library& lib = lane_.lib();
  if (kind == OpKind::AllToAllv && lib.hasAllToAllv() && (requested == Algo::Auto || requested == lib.algo())) return lib.algo();
  return lane_.resolve(kind, requested, bytes);
}

template <class Run>
void ResidentCollectives::onHost(const void* in, size_t inBytes, void* out, size_t outBytes, Run run) {
  Device& d = lane_.device();
  void* hin = in ? hostIn_.get(inBytes) : nullptr;
  void* hout = !out ? nullptr : out == in ? hin : hostOut_.get(outBytes);
  if (in) d.download(hin, in, inBytes);
  run(hin, hout);
  if (out) d.upload(out, hout, outBytes);
}

void ResidentCollectives::exchange(const void* from, void* to, size_t self) {
  lane_.device().copy(to, from, self);
  lane_.transport().exchangeOnDevice(sends_, recvs_);
  // A lone copy is waited for by the executor with the op's other device work.
}

void ResidentCollectives::allreduce(const void* in, void* out, size_t count, DType dt, RedOp op, Algo a) {
  const size_t bytes = count * elementSize(dt);
  if (!lane_.onLibrary(OpKind::AllReduce, a, bytes)) {
    return onHost(in, bytes, out, bytes, [&](const void* i, void* o) { lane_.allreduce(i, o, count, dt, op, a); });
  }
  if (!count) return;
  Library& lib = lane_.lib();
  lane_.complete(lib.allReduce(in, out, count, dt, op, lane_.comm().get(), lane_.device().stream()), Call::AllReduce, bytes);
}

void ResidentCollectives::reduceScatter(const void* in, void* out, size_t count, DType dt, RedOp op, Algo a) {
  const size_t es = elementSize(dt);
  const Partition part{count, size()};
  if (!lane_.onLibrary(OpKind::ReduceScatter, a, count * es)) {
    return onHost(in, count * es, out, part.count(rank()) * es,
                  [&](const void* i, void* o) { lane_.reduceScatter(i, o, count, dt, op, a); });
  }
  // The vendors' blocks are equal: an input that does not divide is padded with zeros into scratch, and a
  // block longer than this rank's (the last ranks') lands in scratch before its real length is copied out.
  const size_t block = part.block(), padded = block * size_t(size());
  if (!block) return;
  const size_t mine = part.count(rank()) * es;
  auto* scratch = static_cast<char*>(scratch_.get((padded == count ? 0 : padded * es) + (mine == block * es ? 0 : block * es)));
  const void* din = in;
  if (padded != count) {
    lane_.device().copy(scratch, in, count * es);
    lane_.device().zero(scratch + count * es, (padded - count) * es);
    din = scratch;
    scratch += padded * es;
  }
  void* dout = mine == block * es ? out : scratch;
  Library& lib = lane_.lib();
  lane_.complete(lib.reduceScatter(din, dout, block, dt, op, lane_.comm().get(), lane_.device().stream()), Call::ReduceScatter,
                 count * es);
  lane_.device().copy(out, dout, mine);
}

void ResidentCollectives::allGather(const void* in, void* out, size_t bytes, Algo a) {
  const size_t total = bytes * size_t(size());
  if (!lane_.onLibrary(OpKind::AllGather, a, total)) {
    return onHost(in, bytes, out, total, [&](const void* i, void* o) { lane_.allGather(i, o, bytes, a); });
  }
  if (!bytes) return;
  Library& lib = lane_.lib();
  lane_.complete(lib.allGather(in, out, bytes, lane_.comm().get(), lane_.device().stream()), Call::AllGather, total);
}

void ResidentCollectives::broadcast(void* data, size_t bytes, int root, Algo a) {
  if (!lane_.onLibrary(OpKind::Broadcast, a, bytes)) {
    return onHost(data, bytes, data, bytes, [&](const void*, void* o) { lane_.broadcast(o, bytes, root, a); });
  }
  if (!bytes) return;
  Library& lib = lane_.lib();
  lane_.complete(lib.broadcast(data, bytes, root, lane_.comm().get(), lane_.device().stream()), Call::Broadcast, bytes);
}

void ResidentCollectives::reduce(const void* in, void* out, size_t count, DType dt, RedOp op, int root, Algo a) {
  const size_t bytes = count * elementSize(dt);
  const bool isRoot = rank() == root;
  if (!lane_.onLibrary(OpKind::Reduce, a, bytes)) {
    return onHost(in, bytes, isRoot ? out : nullptr, bytes,
                  [&](const void* i, void* o) { lane_.reduce(i, o, count, dt, op, root, a); });
  }
  if (!count) return;
  // Only the root's output is written; the others pass scratch, as some libraries want a buffer anyway.
  void* dout = isRoot ? out : scratch_.get(bytes);
  Library& lib = lane_.lib();
  lane_.complete(lib.reduce(in, dout, count, dt, op, root, lane_.comm().get(), lane_.device().stream()), Call::Reduce, bytes);
}

void ResidentCollectives::gather(const void* in, void* out, size_t bytes, int root, Algo a) {
  const int W = size();
  const bool isRoot = rank() == root;
  if (resolve(OpKind::Gather, a, bytes * size_t(W)) != Algo::Direct) {
    return onHost(in, bytes, isRoot ? out : nullptr, bytes * size_t(W),
                  [&](const void* i, void* o) { lane_.gather(i, o, bytes, root, a); });
  }
  sends_.clear();
  recvs_.clear();
  if (!isRoot) {
    sends_.push_back({root, in, bytes});
    return exchange(nullptr, nullptr, 0);
  }
  auto* dst = static_cast<char*>(out);
  for (int j = 0; j < W; ++j) {
    if (j != root) recvs_.push_back({j, dst + size_t(j) * bytes, bytes});
  }
  exchange(in, dst + size_t(root) * bytes, bytes);
}

void ResidentCollectives::scatter(const void* in, void* out, size_t count, size_t esize, int root, Algo a) {
  const int W = size(), r = rank();
  const Partition p{count, W};
  if (resolve(OpKind::Scatter, a, count * esize) != Algo::Direct) {
    return onHost(r == root ? in : nullptr, count * esize, out, p.count(r) * esize,
                  [&](const void* i, void* o) { lane_.scatter(i, o, count, esize, root, a); });
  }
  sends_.clear();
  recvs_.clear();
  if (r != root) {
    recvs_.push_back({root, out, p.count(r) * esize});
    return exchange(nullptr, nullptr, 0);
  }
  const auto* src = static_cast<const char*>(in);
  for (int j = 0; j < W; ++j) {
    if (j != root) sends_.push_back({j, src + p.offset(j) * esize, p.count(j) * esize});
  }
  exchange(src + p.offset(root) * esize, out, p.count(root) * esize);
}

void ResidentCollectives::allToAll(const void* in, void* out, size_t count, size_t esize, Algo /*a*/) {
  const int W = size(), r = rank();
  const Partition p{count, W};
  const size_t mine = p.count(r) * esize;
  const auto* src = static_cast<const char*>(in);
  auto* dst = static_cast<char*>(out);
  sends_.clear();
  recvs_.clear();
  for (int j = 0; j < W; ++j) {
    if (j == r) continue;
    sends_.push_back({j, src + p.offset(j) * esize, p.count(j) * esize});
    recvs_.push_back({j, dst + size_t(j) * mine, mine});
  }
  exchange(src + p.offset(r) * esize, dst + size_t(r) * mine, mine);
}

void ResidentCollectives::allToAllv(const void* in, void* out, const AllToAllvCounts& c, size_t esize, Algo a) {
  const int r = rank();
  Library& lib = lane_.lib();
  if (resolve(OpKind::AllToAllv, a, 0) == lib.algo()) {
    if (!c.largestBlock) return;  // every rank's blocks are empty: every rank skips the call alike
    const int result = lib.allToAllv(in, out, c, esize, lane_.comm().get(), lane_.device().stream());
    return lane_.complete(result, Call::AllToAllv, c.sent() * esize);
  }
  sends_.clear();
  recvs_.clear();
  c.forEachPeer(r, in, out, esize, [&](int j, const void* data, size_t n) { sends_.push_back({j, data, n}); },
                [&](int j, void* data, size_t n) { recvs_.push_back({j, data, n}); });
  exchange(static_cast<const char*>(in) + c.sendOffsets[size_t(r)] * esize, static_cast<char*>(out) + c.recvOffsets[size_t(r)] * esize,
           c.sendCounts[size_t(r)] * esize);
}

void ResidentCollectives::sendRecv(const void* in, void* out, size_t bytes, int to, int from) {
  sends_.clear();
  recvs_.clear();
  if (to == rank() && from == rank()) return exchange(in, out, bytes);
  sends_.push_back({to, in, bytes});
  recvs_.push_back({from, out, bytes});
  exchange(nullptr, nullptr, 0);
}

std::unique_ptr<Collectives> ResidentCollectives::split(int color, int key) {
  return std::make_unique<ResidentCollectives>(lane_.splitLane(color, key));
}

std::unique_ptr<PostedOp> ResidentCollectives::postGather(const void* in, void* out, size_t bytes, int root, Algo a) {
  gather(in, out, bytes, root, a);
  return std::make_unique<CompletedOp>();
}

}  // namespace spmd::library
