#include "backends/nccl/nccl_collectives.h"

#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/partition.h"

namespace spmd::nccl {
namespace {

// Reductions reach a backend only in these types (core/collectives.h).
ncclDataType_t dataType(DType dt) {
  switch (dt) {
    case DType::F32: return ncclFloat32;
    case DType::F64: return ncclFloat64;
    case DType::I32: return ncclInt32;
    case DType::I64: return ncclInt64;
    default: throw CommError(code::kInvalid, "nccl: no reduction in dtype " + std::string(dtypeName(dt)));
  }
}

ncclRedOp_t redOp(RedOp op) {
  switch (op) {
    case RedOp::Sum: return ncclSum;
    case RedOp::Max: return ncclMax;
    case RedOp::Min: return ncclMin;
  }
  throw CommError(code::kInvalid, "nccl: unknown reduction");
}

}  // namespace

NcclCollectives::NcclCollectives(Comm& comm, Device& device, int rank, int size)
    : comm_(comm),
      device_(device),
      rank_(rank),
      size_(size),
      transport_(comm, device, rank, size),
      algorithms_(transport_, [&comm](const std::string& why) { comm.abort(why); }),
      in_(device),
      out_(device) {}

Algo NcclCollectives::resolve(OpKind kind, Algo requested, size_t bytes) const {
  switch (kind) {
    case OpKind::Compute: return Algo::Auto;
    case OpKind::Gather: case OpKind::Scatter: case OpKind::AllToAll: case OpKind::SendRecv:
      return algorithms_.resolve(kind, requested, bytes);
    default:
      return requested == Algo::Auto || requested == Algo::Nccl ? Algo::Nccl : algorithms_.resolve(kind, requested, bytes);
  }
}

template <typename Issue>
void NcclCollectives::run(const char* name, size_t bytes, Issue issue) {
  comm_.check(issue(comm_.get(), device_.stream()), name);
  comm_.wait(device_, transport_.deadline(), std::string("waiting for ") + name + " of " + std::to_string(bytes) + " bytes");
}

void NcclCollectives::allreduce(const void* in, void* out, size_t count, DType dt, RedOp op, Algo a) {
  const size_t bytes = count * elementSize(dt);
  if (!library(OpKind::AllReduce, a, bytes)) return algorithms_.allreduce(in, out, count, dt, op, a);
  if (!count) return;
  void* din = in_.get(bytes);
  void* dout = out_.get(bytes);
  device_.toDevice(din, in, bytes);
  run("ncclAllReduce", bytes, [&](ncclComm_t c, cudaStream_t s) {
    return comm_.api().allReduce(din, dout, count, dataType(dt), redOp(op), c, s);
  });
  device_.toHost(out, dout, bytes);
}

void NcclCollectives::reduceScatter(const void* in, void* out, size_t count, DType dt, RedOp op, Algo a) {
  const size_t es = elementSize(dt);
  if (!library(OpKind::ReduceScatter, a, count * es)) return algorithms_.reduceScatter(in, out, count, dt, op, a);
  // NCCL's blocks are equal: the input is padded to W blocks of ceil(n/W), whose first elements are the
  // Partition's blocks, and each rank keeps its block's real length.
  const Partition part{count, size_};
  const size_t block = part.block();
  if (!block) return;
  auto* din = static_cast<char*>(in_.get(block * size_t(size_) * es));
  void* dout = out_.get(block * es);
  device_.toDevice(din, in, count * es);
  if (const size_t pad = (block * size_t(size_) - count) * es) {
    const std::vector<char> zeros(pad, 0);
    device_.toDevice(din + count * es, zeros.data(), pad);
  }
  run("ncclReduceScatter", count * es, [&](ncclComm_t c, cudaStream_t s) {
    return comm_.api().reduceScatter(din, dout, block, dataType(dt), redOp(op), c, s);
  });
  device_.toHost(out, dout, part.count(rank_) * es);
}

void NcclCollectives::allGather(const void* in, void* out, size_t bytes, Algo a) {
  const size_t total = bytes * size_t(size_);
  if (!library(OpKind::AllGather, a, total)) return algorithms_.allGather(in, out, bytes, a);
  if (!bytes) return;
  void* din = in_.get(bytes);
  void* dout = out_.get(total);
  device_.toDevice(din, in, bytes);
  run("ncclAllGather", total, [&](ncclComm_t c, cudaStream_t s) { return comm_.api().allGather(din, dout, bytes, ncclInt8, c, s); });
  device_.toHost(out, dout, total);
}

void NcclCollectives::broadcast(void* data, size_t bytes, int root, Algo a) {
  if (!library(OpKind::Broadcast, a, bytes)) return algorithms_.broadcast(data, bytes, root, a);
  if (!bytes) return;
  void* dbuf = in_.get(bytes);
  if (rank_ == root) device_.toDevice(dbuf, data, bytes);
  run("ncclBroadcast", bytes, [&](ncclComm_t c, cudaStream_t s) {
    return comm_.api().broadcast(dbuf, dbuf, bytes, ncclInt8, root, c, s);
  });
  if (rank_ != root) device_.toHost(data, dbuf, bytes);
}

void NcclCollectives::reduce(const void* in, void* out, size_t count, DType dt, RedOp op, int root, Algo a) {
  const size_t bytes = count * elementSize(dt);
  if (!library(OpKind::Reduce, a, bytes)) return algorithms_.reduce(in, out, count, dt, op, root, a);
  if (!count) return;
  void* din = in_.get(bytes);
  void* dout = out_.get(bytes);
  device_.toDevice(din, in, bytes);
  run("ncclReduce", bytes, [&](ncclComm_t c, cudaStream_t s) {
    return comm_.api().reduce(din, dout, count, dataType(dt), redOp(op), root, c, s);
  });
  if (rank_ == root) device_.toHost(out, dout, bytes);
}

void NcclCollectives::barrier() {
  const float one = 1;
  float sum = 0;
  allreduce(&one, &sum, 1, DType::F32, RedOp::Sum, Algo::Nccl);
}

void NcclCollectives::gather(const void* in, void* out, size_t bytes, int root, Algo a) {
  algorithms_.gather(in, out, bytes, root, a);
}

std::unique_ptr<PostedOp> NcclCollectives::postGather(const void* in, void* out, size_t bytes, int root, Algo a) {
  gather(in, out, bytes, root, a);
  return std::make_unique<CompletedOp>();
}

void NcclCollectives::scatter(const void* in, void* out, size_t count, size_t esize, int root, Algo a) {
  algorithms_.scatter(in, out, count, esize, root, a);
}

void NcclCollectives::allToAll(const void* in, void* out, size_t count, size_t esize) { algorithms_.allToAll(in, out, count, esize); }

void NcclCollectives::sendRecv(const void* in, void* out, size_t bytes, int shift) { algorithms_.sendRecv(in, out, bytes, shift); }

std::unique_ptr<Collectives> NcclCollectives::split(int, int) {
  throw CommError(code::kUnsupported, "nccl: sub-communicators (ncclCommSplit) are not supported by this backend yet");
}

}  // namespace spmd::nccl
