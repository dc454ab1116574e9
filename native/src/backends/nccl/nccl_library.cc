#include "backends/nccl/nccl_library.h"

#include "backends/nccl/nccl_error.h"
#include "base/error.h"

namespace spmd::nccl {
namespace {

ncclComm_t comm(library::Handle c) { return static_cast<ncclComm_t>(c); }
cudaStream_t stream(library::Stream s) { return static_cast<cudaStream_t>(s); }

}  // namespace

ncclDataType_t dataType(DType dt) {
  switch (dt) {
    case DType::F32: return ncclFloat32;
    case DType::F64: return ncclFloat64;
    case DType::I32: return ncclInt32;
    case DType::I64: return ncclInt64;
    case DType::F16: return ncclFloat16;
    case DType::BF16: return ncclBfloat16;
  }
  throw CommError(code::kInvalid, "nccl: no NCCL type for dtype " + std::string(dtypeName(dt)));
}

ncclRedOp_t redOp(RedOp op) {
  switch (op) {
    case RedOp::Sum: return ncclSum;
    case RedOp::Max: return ncclMax;
    case RedOp::Min: return ncclMin;
  }
  throw CommError(code::kInvalid, "nccl: unknown reduction");
}

const char* NcclLibrary::errorCode() const { return code::kNccl; }

const char* NcclLibrary::call(library::Call c) const {
  switch (c) {
    case library::Call::AllReduce: return "ncclAllReduce";
    case library::Call::ReduceScatter: return "ncclReduceScatter";
    case library::Call::AllGather: return "ncclAllGather";
    case library::Call::Broadcast: return "ncclBroadcast";
    case library::Call::Reduce: return "ncclReduce";
    case library::Call::SendRecv: case library::Call::AllToAllv: return "ncclSend/ncclRecv";
    case library::Call::Split: return "ncclCommSplit";
  }
  return "NCCL";
}

std::string NcclLibrary::describe(int r) const { return nccl::describe(api_, ncclResult_t(r)); }

int NcclLibrary::allReduce(const void* in, void* out, size_t count, DType dt, RedOp op, library::Handle c, library::Stream s) {
  return api_.allReduce(in, out, count, dataType(dt), redOp(op), comm(c), stream(s));
}

int NcclLibrary::reduceScatter(const void* in, void* out, size_t blockCount, DType dt, RedOp op, library::Handle c,
                               library::Stream s) {
  return api_.reduceScatter(in, out, blockCount, dataType(dt), redOp(op), comm(c), stream(s));
}

int NcclLibrary::allGather(const void* in, void* out, size_t bytes, library::Handle c, library::Stream s) {
  return api_.allGather(in, out, bytes, ncclInt8, comm(c), stream(s));
}

int NcclLibrary::broadcast(void* data, size_t bytes, int root, library::Handle c, library::Stream s) {
  return api_.broadcast(data, data, bytes, ncclInt8, root, comm(c), stream(s));
}

int NcclLibrary::reduce(const void* in, void* out, size_t count, DType dt, RedOp op, int root, library::Handle c,
                        library::Stream s) {
  return api_.reduce(in, out, count, dataType(dt), redOp(op), root, comm(c), stream(s));
}

int NcclLibrary::exchange(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs, library::Handle c,
                          library::Stream s) {
  if (ncclResult_t r = api_.groupStart(); r != ncclSuccess) return r;
  ncclResult_t first = ncclSuccess;
  for (const RecvSpec& r : recvs) {
    if (first == ncclSuccess) first = api_.recv(r.data, r.bytes, ncclInt8, r.peer, comm(c), stream(s));
  }
  for (const SendSpec& x : sends) {
    if (first == ncclSuccess) first = api_.send(x.data, x.bytes, ncclInt8, x.peer, comm(c), stream(s));
  }
  // The group is closed even after a failed call, so the next group starts clean.
  const ncclResult_t end = api_.groupEnd();
  return first != ncclSuccess ? first : end;
}

std::string NcclLibrary::splitMissing() const {
  if (api_.commSplit) return "";
  return "nccl: sub-communicators (a quantized_allreduce's nodes) need ncclCommSplit (NCCL 2.18 or later), which " +
         api_.path + " lacks";
}

int NcclLibrary::split(library::Handle c, int color, int key, library::Handle& child) {
  ncclComm_t out = nullptr;
  const ncclResult_t r = api_.commSplit(comm(c), color, key, &out, nullptr);
  child = out;
  return r;
}

bool NcclLibrary::asyncError(library::Handle c, int& result) {
  if (!api_.commGetAsyncError) return false;
  ncclResult_t async = ncclSuccess;
  check(api_, api_.commGetAsyncError(comm(c), &async), "ncclCommGetAsyncError");
  // ncclInProgress: a nonblocking communicator still working, not an error.
  result = async == ncclInProgress ? ncclSuccess : async;
  return true;
}

bool NcclLibrary::abort(library::Handle c) {
  if (!api_.commAbort) return false;
  api_.commAbort(comm(c));
  return true;
}

}  // namespace spmd::nccl
