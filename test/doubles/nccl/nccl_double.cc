// A test double for NCCL: the subset of NCCL's C ABI the backend uses (as declared in
// native/src/backends/nccl/nccl_types.h), on host memory, over the doubles' engine (common/). It exists
// so CI can run the nccl backend without a GPU; it is loaded only when a test names it in NCCL_LIBRARY.
// "Device" pointers are host pointers (the CUDA runtime double's, cuda/) and streams are that double's.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backends/nccl/nccl_types.h"
#include "common/double_comm.h"

using spmd::doubles::DoubleComm;

struct ncclComm {
  std::unique_ptr<DoubleComm> engine;
};

namespace {

bool reduction(ncclDataType_t t, spmd::DType& out) {
  switch (t) {
    case ncclFloat32: out = spmd::DType::F32; return true;
    case ncclFloat64: out = spmd::DType::F64; return true;
    case ncclInt32: out = spmd::DType::I32; return true;
    case ncclInt64: out = spmd::DType::I64; return true;
    default: return false;
  }
}

size_t sizeOf(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}

bool redOp(ncclRedOp_t op, spmd::RedOp& out) {
  switch (op) {
    case ncclSum: out = spmd::RedOp::Sum; return true;
    case ncclMax: out = spmd::RedOp::Max; return true;
    case ncclMin: out = spmd::RedOp::Min; return true;
    default: return false;
  }
}

template <typename Op>
ncclResult_t enqueue(ncclComm_t comm, cudaStream_t stream, Op op) {
  return comm->engine->enqueue(stream, op) ? ncclSuccess : ncclInvalidUsage;
}

// The sends and receives between ncclGroupStart and ncclGroupEnd, issued as one exchange.
struct Group {
  int depth = 0;
  ncclComm* comm = nullptr;
  cudaStream_t stream = nullptr;
  std::vector<spmd::SendSpec> sends;
  std::vector<spmd::RecvSpec> recvs;
};
thread_local Group group;

// Tests only: SPMD_DOUBLE_CORRUPT_RECV=<rank>:<byte> flips the top bit of that byte of every message rank
// <rank> receives through ncclRecv (for byte 4k+3, float32 element k's sign), so that the runner's check has
// wrong elements to locate (test/diagnose.test.js).
void corruptReceived(int rank, const std::vector<spmd::RecvSpec>& recvs) {
  const char* v = std::getenv("SPMD_DOUBLE_CORRUPT_RECV");
  int who = -1;
  size_t byte = 0;
  if (!v || std::sscanf(v, "%d:%zu", &who, &byte) != 2 || who != rank) return;
  for (const spmd::RecvSpec& r : recvs) {
    if (r.bytes > byte) static_cast<uint8_t*>(r.data)[byte] ^= 0x80;
  }
}

ncclResult_t flush() {
  Group g = std::move(group);
  group = Group{};
  if (!g.comm) return ncclSuccess;
  DoubleComm* e = g.comm->engine.get();
  return enqueue(g.comm, g.stream, [e, sends = std::move(g.sends), recvs = std::move(g.recvs)] {
    e->transport().exchange(sends, recvs);
    corruptReceived(e->rank(), recvs);
  });
}

ncclResult_t point(ncclComm* comm, cudaStream_t stream, const spmd::SendSpec* s, const spmd::RecvSpec* r) {
  if (group.comm && (group.comm != comm || group.stream != stream)) return ncclInvalidUsage;  // one comm per group
  group.comm = comm;
  group.stream = stream;
  if (s) group.sends.push_back(*s);
  if (r) group.recvs.push_back(*r);
  return group.depth ? ncclSuccess : flush();
}

}  // namespace

SPMD_DOUBLE_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id, 0, sizeof *id);
  const std::string name = DoubleComm::newName();
  std::memcpy(id->internal, name.c_str(), name.size());
  return ncclSuccess;
}

SPMD_DOUBLE_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* out, int nranks, ncclUniqueId id, int rank) {
  auto engine = DoubleComm::join(std::string(id.internal, strnlen(id.internal, sizeof id.internal)), nranks, rank);
  if (!engine) return ncclSystemError;
  *out = new ncclComm{std::move(engine)};
  return ncclSuccess;
}

SPMD_DOUBLE_EXPORT ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                                              ncclComm_t comm, cudaStream_t stream) {
  spmd::DType t;
  spmd::RedOp o;
  if (!reduction(dt, t) || !redOp(op, o)) return ncclInvalidArgument;
  DoubleComm* e = comm->engine.get();
  return enqueue(comm, stream, [=] { e->algorithms().allreduce(send, recv, count, t, o, spmd::Algo::Auto); });
}

SPMD_DOUBLE_EXPORT ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t recvCount, ncclDataType_t dt,
                                                  ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  spmd::DType t;
  spmd::RedOp o;
  if (!reduction(dt, t) || !redOp(op, o)) return ncclInvalidArgument;
  DoubleComm* e = comm->engine.get();
  const size_t count = recvCount * size_t(e->size());  // equal blocks: the Partition's
  return enqueue(comm, stream, [=] { e->algorithms().reduceScatter(send, recv, count, t, o, spmd::Algo::Auto); });
}

SPMD_DOUBLE_EXPORT ncclResult_t ncclAllGather(const void* send, void* recv, size_t sendCount, ncclDataType_t dt,
                                              ncclComm_t comm, cudaStream_t stream) {
  DoubleComm* e = comm->engine.get();
  const size_t bytes = sendCount * sizeOf(dt);
  return enqueue(comm, stream, [=] { e->algorithms().allGather(send, recv, bytes, spmd::Algo::Auto); });
}

SPMD_DOUBLE_EXPORT ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t dt, int root,
                                              ncclComm_t comm, cudaStream_t stream) {
  DoubleComm* e = comm->engine.get();
  const size_t bytes = count * sizeOf(dt);
  return enqueue(comm, stream, [=] {
    if (e->rank() == root && send != recv) std::memcpy(recv, send, bytes);
    e->algorithms().broadcast(recv, bytes, root, spmd::Algo::Auto);
  });
}

SPMD_DOUBLE_EXPORT ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                                           int root, ncclComm_t comm, cudaStream_t stream) {
  spmd::DType t;
  spmd::RedOp o;
  if (!reduction(dt, t) || !redOp(op, o)) return ncclInvalidArgument;
  DoubleComm* e = comm->engine.get();
  return enqueue(comm, stream, [=] { e->algorithms().reduce(send, recv, count, t, o, root, spmd::Algo::Auto); });
}

SPMD_DOUBLE_EXPORT ncclResult_t ncclSend(const void* send, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,
                                         cudaStream_t stream) {
  const spmd::SendSpec s{peer, send, count * sizeOf(dt)};
  return point(comm, stream, &s, nullptr);
}

SPMD_DOUBLE_EXPORT ncclResult_t ncclRecv(void* recv, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,
                                         cudaStream_t stream) {
  const spmd::RecvSpec r{peer, recv, count * sizeOf(dt)};
  return point(comm, stream, nullptr, &r);
}

SPMD_DOUBLE_EXPORT ncclResult_t ncclGroupStart() {
  ++group.depth;
  return ncclSuccess;
}

SPMD_DOUBLE_EXPORT ncclResult_t ncclGroupEnd() {
  if (group.depth == 0) return ncclInvalidUsage;
  return --group.depth ? ncclSuccess : flush();
}

#ifndef SPMD_DOUBLE_MINIMAL
// As NCCL 2.18.5 would say (the first with ncclCommSplit, which the full double has).
SPMD_DOUBLE_EXPORT ncclResult_t ncclGetVersion(int* version) {
  *version = 21805;
  return ncclSuccess;
}

SPMD_DOUBLE_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t*) {
  try {
    auto engine = comm->engine->split(color, key);
    *newcomm = engine ? new ncclComm{std::move(engine)} : nullptr;
    return ncclSuccess;
  } catch (const std::exception&) {
    return ncclSystemError;
  }
}

SPMD_DOUBLE_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  *asyncError = comm->engine->asyncFault() || comm->engine->failed() ? ncclRemoteError : ncclSuccess;
  return ncclSuccess;
}

SPMD_DOUBLE_EXPORT const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclSystemError: return "unhandled system error (double: SPMD_DOUBLE_FAIL_INIT or shm failure)";
    case ncclRemoteError: return "remote process exited or there was a network error (double)";
    case ncclInvalidArgument: return "invalid argument (double)";
    case ncclInvalidUsage: return "invalid usage (double)";
    default: return "error (double)";
  }
}
#endif

SPMD_DOUBLE_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  comm->engine->abort();
  delete comm;
  return ncclSuccess;
}

SPMD_DOUBLE_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}
