#include "backends/library/library_collectives.h"

#include <string>
#include <vector>

#include "base/error.h"
#include "base/partition.h"

namespace spmd::library {

LibraryCollectives::LibraryCollectives(Comm& comm, Device& device, int rank, int size)
    : comm_(comm),
      device_(device),
      rank_(rank),
      size_(size),
      lib_(comm.lib()),
      transport_(comm, device, rank, size),
      algorithms_(transport_, [&comm](const std::string& why) { comm.abort(why); }),
      in_(device),
      out_(device) {}

LibraryCollectives::LibraryCollectives(std::unique_ptr<Comm> comm, LibraryCollectives& lane, int rank, int size)
    : ownedComm_(std::move(comm)),
      lane_(&lane),
      comm_(*ownedComm_),
      device_(lane.device_),
      rank_(rank),
      size_(size),
      lib_(comm_.lib()),
      transport_(comm_, device_, rank, size, &lane.transport_),
      algorithms_(transport_, [this](const std::string& why) { comm_.abort(why); }),
      in_(device_),
      out_(device_) {}

Algo LibraryCollectives::resolve(OpKind kind, Algo requested, size_t bytes) const {
  switch (kind) {
    case OpKind::Compute: return Algo::Auto;
    case OpKind::Gather: case OpKind::Scatter: case OpKind::AllToAll: case OpKind::AllToAllv: case OpKind::SendRecv:
      return algorithms_.resolve(kind, requested, bytes);
    default:
      return requested == Algo::Auto || requested == lib_.algo() ? lib_.algo() : algorithms_.resolve(kind, requested, bytes);
  }
}

void LibraryCollectives::complete(int result, Call c, size_t bytes) {
  comm_.check(result, c);
  device_.issued();
  comm_.wait(device_, transport_.deadline(), std::string("waiting for ") + lib_.call(c) + " of " + std::to_string(bytes) + " bytes");
}

void LibraryCollectives::allreduce(const void* in, void* out, size_t count, DType dt, RedOp op, Algo a) {
  const size_t bytes = count * elementSize(dt);
  if (!onLibrary(OpKind::AllReduce, a, bytes)) return algorithms_.allreduce(in, out, count, dt, op, a);
  if (!count) return;
  void* din = in_.get(bytes);
  void* dout = out_.get(bytes);
  device_.upload(din, in, bytes);
  complete(lib_.allReduce(din, dout, count, dt, op, comm_.get(), device_.stream()), Call::AllReduce, bytes);
  device_.download(out, dout, bytes);
}

void LibraryCollectives::reduceScatter(const void* in, void* out, size_t count, DType dt, RedOp op, Algo a) {
  const size_t es = elementSize(dt);
  if (!onLibrary(OpKind::ReduceScatter, a, count * es)) return algorithms_.reduceScatter(in, out, count, dt, op, a);
  // The vendors' blocks are equal: the input is padded to W blocks of ceil(n/W), whose first elements are the
  // Partition's blocks, and each rank keeps its block's real length.
  const Partition part{count, size_};
  const size_t block = part.block();
  if (!block) return;
  auto* din = static_cast<char*>(in_.get(block * size_t(size_) * es));
  void* dout = out_.get(block * es);
  device_.upload(din, in, count * es);
  device_.zero(din + count * es, (block * size_t(size_) - count) * es);
  complete(lib_.reduceScatter(din, dout, block, dt, op, comm_.get(), device_.stream()), Call::ReduceScatter, count * es);
  device_.download(out, dout, part.count(rank_) * es);
}

void LibraryCollectives::allGather(const void* in, void* out, size_t bytes, Algo a) {
  const size_t total = bytes * size_t(size_);
  if (!onLibrary(OpKind::AllGather, a, total)) return algorithms_.allGather(in, out, bytes, a);
  if (!bytes) return;
  void* din = in_.get(bytes);
  void* dout = out_.get(total);
  device_.upload(din, in, bytes);
  complete(lib_.allGather(din, dout, bytes, comm_.get(), device_.stream()), Call::AllGather, total);
  device_.download(out, dout, total);
}

void LibraryCollectives::broadcast(void* data, size_t bytes, int root, Algo a) {
  if (!onLibrary(OpKind::Broadcast, a, bytes)) return algorithms_.broadcast(data, bytes, root, a);
  if (!bytes) return;
  void* dbuf = in_.get(bytes);
  if (rank_ == root) device_.upload(dbuf, data, bytes);
  complete(lib_.broadcast(dbuf, bytes, root, comm_.get(), device_.stream()), Call::Broadcast, bytes);
  if (rank_ != root) device_.download(data, dbuf, bytes);
}

void LibraryCollectives::reduce(const void* in, void* out, size_t count, DType dt, RedOp op, int root, Algo a) {
  const size_t bytes = count * elementSize(dt);
  if (!onLibrary(OpKind::Reduce, a, bytes)) return algorithms_.reduce(in, out, count, dt, op, root, a);
  if (!count) return;
  void* din = in_.get(bytes);
  void* dout = out_.get(bytes);
  device_.upload(din, in, bytes);
  complete(lib_.reduce(din, dout, count, dt, op, root, comm_.get(), device_.stream()), Call::Reduce, bytes);
  if (rank_ == root) device_.download(out, dout, bytes);
}

void LibraryCollectives::barrier(Algo) {
  const float one = 1;
  float sum = 0;
  allreduce(&one, &sum, 1, DType::F32, RedOp::Sum, lib_.algo());
}

void LibraryCollectives::gather(const void* in, void* out, size_t bytes, int root, Algo a) {
  algorithms_.gather(in, out, bytes, root, a);
}

std::unique_ptr<PostedOp> LibraryCollectives::postGather(const void* in, void* out, size_t bytes, int root, Algo a) {
  gather(in, out, bytes, root, a);
  return std::make_unique<CompletedOp>();
}

void LibraryCollectives::scatter(const void* in, void* out, size_t count, size_t esize, int root, Algo a) {
  algorithms_.scatter(in, out, count, esize, root, a);
}

void LibraryCollectives::allToAll(const void* in, void* out, size_t count, size_t esize, Algo a) { algorithms_.allToAll(in, out, count, esize, a); }

void LibraryCollectives::allToAllv(const void* in, void* out, const AllToAllvCounts& c, size_t esize, Algo a) {
  algorithms_.allToAllv(in, out, c, esize, a);
}

void LibraryCollectives::sendRecv(const void* in, void* out, size_t bytes, int to, int from) { algorithms_.sendRecv(in, out, bytes, to, from); }

std::unique_ptr<LibraryCollectives> LibraryCollectives::splitLane(int color, int key) {
  if (const std::string missing = lib_.splitMissing(); !missing.empty()) throw CommError(code::kUnsupported, missing);
  // Every rank's (color, key), for this rank's place in its group: the library's own ranking, (key, rank).
  const int mine[2] = {color, key};
  std::vector<int> all(2 * size_t(size_));
  allGather(mine, all.data(), sizeof mine, Algo::Auto);
  int rank = 0, size = 0;
  for (int j = 0; j < size_; ++j) {
    if (all[2 * size_t(j)] != color) continue;
    const int k = all[2 * size_t(j) + 1];
    ++size;
    if (k < key || (k == key && j < rank_)) ++rank;
  }
  const Handle child = comm_.split(color, key, device_, transport_.deadline());
  return std::make_unique<LibraryCollectives>(std::make_unique<Comm>(lib_, child, &comm_), *this, rank, size);
}

}  // namespace spmd::library
