// A test double for NCCL: the subset of NCCL's C ABI the backend uses (as declared in
// native/src/backends/nccl/nccl_types.h), on host memory, over the project's shm transport and shared
// algorithms. It exists so CI can run the nccl backend without a GPU; it is loaded only when a test
// names it in NCCL_LIBRARY. "Device" pointers are host pointers and streams are the double's own
// (spmdDoubleStream*), whose ops run in order on a thread per communicator, as a CUDA stream runs them
// beside the host.
//
// Faults the tests ask for through the environment:
//   SPMD_NCCL_DOUBLE_FAIL_INIT=1     ncclCommInitRank fails with ncclSystemError
//   SPMD_NCCL_DOUBLE_ASYNC_ERROR=1   every op hangs and ncclCommGetAsyncError reports ncclRemoteError
//   SPMD_NCCL_DOUBLE_STALL_RANK=r    rank r's ops hang until the communicator is aborted
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backends/nccl/nccl_types.h"
#include "backends/shm/segment.h"
#include "backends/shm/shm_transport.h"
#include "core/error.h"
#include "core/op_queue.h"
#include "core/transport_collectives.h"

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using namespace std::chrono_literals;

struct Stream {
  std::atomic<int> pending{0};
};

bool envIs(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, value) == 0;
}

}  // namespace

struct ncclComm {
  ncclComm(spmd::shm::Segment seg, int rank)
      : segment(std::move(seg)),
        transport(segment, rank, 0),
        algorithms(transport, [this](const std::string& why) { transport.abort(why); }) {}

  spmd::shm::Segment segment;
  spmd::shm::ShmTransport transport;
  spmd::TransportCollectives algorithms;
  std::atomic<bool> aborted{false};
  std::atomic<int> asyncError{ncclSuccess};
  bool hang = false;     // a fault the test asked for: ops never finish on their own
  spmd::OpQueue worker;  // last: joined first, while the rest is still alive

  // Runs `op` after the ops issued before it, as a stream would; a failure is what
  // ncclCommGetAsyncError then reports.
  template <typename Op>
  ncclResult_t enqueue(cudaStream_t s, Op op) {
    if (aborted) return ncclInvalidUsage;
    auto* stream = reinterpret_cast<Stream*>(s);
    if (!stream) return ncclInvalidArgument;  // the double has no default stream
    stream->pending++;
    worker.submit([this, stream, op] {
      while (hang && !aborted) std::this_thread::sleep_for(5ms);
      if (!aborted) {
        try {
          op();
        } catch (const std::exception&) {
          asyncError = ncclRemoteError;
        }
      }
      stream->pending--;
    });
    return ncclSuccess;
  }
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

// The sends and receives between ncclGroupStart and ncclGroupEnd, issued as one exchange.
struct Group {
  int depth = 0;
  ncclComm* comm = nullptr;
  cudaStream_t stream = nullptr;
  std::vector<spmd::SendSpec> sends;
  std::vector<spmd::RecvSpec> recvs;
};
thread_local Group group;

ncclResult_t flush() {
  Group g = std::move(group);
  group = Group{};
  if (!g.comm) return ncclSuccess;
  ncclComm* c = g.comm;
  return c->enqueue(g.stream, [c, sends = std::move(g.sends), recvs = std::move(g.recvs)] {
    c->transport.exchange(sends, recvs);
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

EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id, 0, sizeof *id);
  std::random_device rd;
  const std::string name = "/spmd-nccl-double-" + std::to_string(getpid()) + "-" + std::to_string(rd());
  std::memcpy(id->internal, name.c_str(), name.size());
  return ncclSuccess;
}

EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* out, int nranks, ncclUniqueId id, int rank) {
  if (envIs("SPMD_NCCL_DOUBLE_FAIL_INIT", "1")) return ncclSystemError;
  if (nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  constexpr int kLanes = 1;
  constexpr size_t kChannelBytes = 64 * 1024;
  const std::string name(id.internal, strnlen(id.internal, sizeof id.internal));
  const auto giveUp = std::chrono::steady_clock::now() + 30s;
  std::unique_ptr<ncclComm> comm;
  // Rank 0 creates the segment; the others retry until it exists and is laid out (it may not be yet).
  while (!comm) {
    try {
      comm = std::make_unique<ncclComm>(rank == 0 ? spmd::shm::Segment::create(name, nranks, kLanes, kChannelBytes)
                                                  : spmd::shm::Segment::attach(name, nranks, kLanes, kChannelBytes),
                                        rank);
    } catch (const spmd::CommError&) {
      if (rank == 0 || std::chrono::steady_clock::now() >= giveUp) return ncclSystemError;
      std::this_thread::sleep_for(5ms);
    }
  }
  // Like NCCL, returns once every rank joined; then the name is no longer needed.
  auto& attached = comm->segment.header().attached;
  attached.fetch_add(1);
  while (int(attached.load()) < nranks) {
    if (std::chrono::steady_clock::now() >= giveUp) return ncclSystemError;
    std::this_thread::sleep_for(1ms);
  }
  if (rank == 0) comm->segment.unlink();
  const char* stall = std::getenv("SPMD_NCCL_DOUBLE_STALL_RANK");
  comm->hang = envIs("SPMD_NCCL_DOUBLE_ASYNC_ERROR", "1") || (stall && std::atoi(stall) == rank);
  *out = comm.release();
  return ncclSuccess;
}

EXPORT ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                                  ncclComm_t comm, cudaStream_t stream) {
  spmd::DType t;
  spmd::RedOp o;
  if (!reduction(dt, t) || !redOp(op, o)) return ncclInvalidArgument;
  return comm->enqueue(stream, [=] { comm->algorithms.allreduce(send, recv, count, t, o, spmd::Algo::Auto); });
}

EXPORT ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t recvCount, ncclDataType_t dt,
                                      ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  spmd::DType t;
  spmd::RedOp o;
  if (!reduction(dt, t) || !redOp(op, o)) return ncclInvalidArgument;
  const size_t count = recvCount * size_t(comm->transport.size());  // equal blocks: the Partition's
  return comm->enqueue(stream, [=] { comm->algorithms.reduceScatter(send, recv, count, t, o, spmd::Algo::Auto); });
}

EXPORT ncclResult_t ncclAllGather(const void* send, void* recv, size_t sendCount, ncclDataType_t dt, ncclComm_t comm,
                                  cudaStream_t stream) {
  const size_t bytes = sendCount * sizeOf(dt);
  return comm->enqueue(stream, [=] { comm->algorithms.allGather(send, recv, bytes, spmd::Algo::Auto); });
}

EXPORT ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t dt, int root,
                                  ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * sizeOf(dt);
  return comm->enqueue(stream, [=] {
    if (comm->transport.rank() == root && send != recv) std::memcpy(recv, send, bytes);
    comm->algorithms.broadcast(recv, bytes, root, spmd::Algo::Auto);
  });
}

EXPORT ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t dt, ncclRedOp_t op, int root,
                               ncclComm_t comm, cudaStream_t stream) {
  spmd::DType t;
  spmd::RedOp o;
  if (!reduction(dt, t) || !redOp(op, o)) return ncclInvalidArgument;
  return comm->enqueue(stream, [=] { comm->algorithms.reduce(send, recv, count, t, o, root, spmd::Algo::Auto); });
}

EXPORT ncclResult_t ncclSend(const void* send, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,
                             cudaStream_t stream) {
  const spmd::SendSpec s{peer, send, count * sizeOf(dt)};
  return point(comm, stream, &s, nullptr);
}

EXPORT ncclResult_t ncclRecv(void* recv, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,
                             cudaStream_t stream) {
  const spmd::RecvSpec r{peer, recv, count * sizeOf(dt)};
  return point(comm, stream, nullptr, &r);
}

EXPORT ncclResult_t ncclGroupStart() {
  ++group.depth;
  return ncclSuccess;
}

EXPORT ncclResult_t ncclGroupEnd() {
  if (group.depth == 0) return ncclInvalidUsage;
  return --group.depth ? ncclSuccess : flush();
}

#ifndef SPMD_DOUBLE_MINIMAL
EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  // The fault the tests ask for shows once there is work that cannot finish.
  *asyncError = comm->hang && envIs("SPMD_NCCL_DOUBLE_ASYNC_ERROR", "1") ? ncclRemoteError : ncclResult_t(comm->asyncError.load());
  return ncclSuccess;
}

EXPORT const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclSystemError: return "unhandled system error (double: SPMD_NCCL_DOUBLE_FAIL_INIT or shm failure)";
    case ncclRemoteError: return "remote process exited or there was a network error (double)";
    case ncclInvalidArgument: return "invalid argument (double)";
    case ncclInvalidUsage: return "invalid usage (double)";
    default: return "error (double)";
  }
}
#endif

EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  comm->aborted = true;
  comm->transport.abort("NCCL communicator aborted");  // wakes this rank's op and tells the others
  delete comm;
  return ncclSuccess;
}

EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}

EXPORT int spmdDoubleStreamCreate(cudaStream_t* stream) {
  *stream = reinterpret_cast<cudaStream_t>(new Stream);
  return 0;
}

EXPORT int spmdDoubleStreamQuery(cudaStream_t stream) { return reinterpret_cast<Stream*>(stream)->pending.load() ? 1 : 0; }

EXPORT int spmdDoubleStreamDestroy(cudaStream_t stream) {
  delete reinterpret_cast<Stream*>(stream);
  return 0;
}
