#include "backends/hccl/hccl_library.h"

#include "base/error.h"

namespace spmd::hccl {

HcclDataType dataType(DType dt) {
  switch (dt) {
    case DType::F32: return HCCL_DATA_TYPE_FP32;
    case DType::F64: return HCCL_DATA_TYPE_FP64;
    case DType::I32: return HCCL_DATA_TYPE_INT32;
    case DType::I64: return HCCL_DATA_TYPE_INT64;
    case DType::F16: return HCCL_DATA_TYPE_FP16;
    case DType::BF16: return HCCL_DATA_TYPE_BFP16;
  }
  throw CommError(code::kInvalid, "hccl: no HCCL type for dtype " + std::string(dtypeName(dt)));
}

HcclReduceOp redOp(RedOp op) {
  switch (op) {
    case RedOp::Sum: return HCCL_REDUCE_SUM;
    case RedOp::Max: return HCCL_REDUCE_MAX;
    case RedOp::Min: return HCCL_REDUCE_MIN;
  }
  throw CommError(code::kInvalid, "hccl: unknown reduction");
}

const char* resultName(HcclResult r) {
  static constexpr const char* kNames[] = {
      "HCCL_SUCCESS",        "HCCL_E_PARA",         "HCCL_E_PTR",          "HCCL_E_MEMORY",     "HCCL_E_INTERNAL",
      "HCCL_E_NOT_SUPPORT",  "HCCL_E_NOT_FOUND",    "HCCL_E_UNAVAIL",      "HCCL_E_SYSCALL",    "HCCL_E_TIMEOUT",
      "HCCL_E_OPEN_FILE_FAILURE", "HCCL_E_TCP_CONNECT", "HCCL_E_ROCE_CONNECT", "HCCL_E_TCP_TRANSFER",
      "HCCL_E_ROCE_TRANSFER", "HCCL_E_RUNTIME",     "HCCL_E_DRV",          "HCCL_E_PROFILING",  "HCCL_E_CCE",
      "HCCL_E_NETWORK",      "HCCL_E_AGAIN",        "HCCL_E_REMOTE"};
  const int i = int(r);
  return i >= 0 && i < int(std::size(kNames)) ? kNames[i] : "unknown HcclResult";
}

std::string describe(const Api& api, HcclResult r) {
  std::string s = std::string(resultName(r)) + " (" + std::to_string(int(r)) + ")";
  if (api.getErrorString) {
    if (const char* text = api.getErrorString(r)) s += ": " + std::string(text);
  }
  return s;
}

const char* HcclLibrary::errorCode() const { return code::kHccl; }

const char* HcclLibrary::call(library::Call c) const {
  switch (c) {
    case library::Call::AllReduce: return "HcclAllReduce";
    case library::Call::ReduceScatter: return "HcclReduceScatter";
    case library::Call::AllGather: return "HcclAllGather";
    case library::Call::Broadcast: return "HcclBroadcast";
    case library::Call::Reduce: return "HcclReduce";
    case library::Call::SendRecv: return "HcclBatchSendRecv";
    case library::Call::AllToAllv: return "HcclAlltoAllV";
    case library::Call::Split: return "HcclCreateSubCommConfig";
  }
  return "HCCL";
}

std::string HcclLibrary::describe(int r) const { return hccl::describe(api_, HcclResult(r)); }

// HCCL's buffers are not const even where it only reads them.
int HcclLibrary::allReduce(const void* in, void* out, size_t count, DType dt, RedOp op, library::Handle c, library::Stream s) {
  return api_.allReduce(const_cast<void*>(in), out, count, dataType(dt), redOp(op), c, s);
}

int HcclLibrary::reduceScatter(const void* in, void* out, size_t blockCount, DType dt, RedOp op, library::Handle c,
                               library::Stream s) {
  return api_.reduceScatter(const_cast<void*>(in), out, blockCount, dataType(dt), redOp(op), c, s);
}

int HcclLibrary::allGather(const void* in, void* out, size_t bytes, library::Handle c, library::Stream s) {
  return api_.allGather(const_cast<void*>(in), out, bytes, HCCL_DATA_TYPE_INT8, c, s);
}

int HcclLibrary::broadcast(void* data, size_t bytes, int root, library::Handle c, library::Stream s) {
  return api_.broadcast(data, bytes, HCCL_DATA_TYPE_INT8, uint32_t(root), c, s);
}

int HcclLibrary::reduce(const void* in, void* out, size_t count, DType dt, RedOp op, int root, library::Handle c,
                        library::Stream s) {
  return api_.reduce(const_cast<void*>(in), out, count, dataType(dt), redOp(op), uint32_t(root), c, s);
}

int HcclLibrary::exchange(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs, library::Handle c,
                          library::Stream s) {
  items_.clear();
  for (const RecvSpec& r : recvs) items_.push_back({HCCL_RECV, r.data, r.bytes, HCCL_DATA_TYPE_INT8, uint32_t(r.peer)});
  for (const SendSpec& x : sends) {
    items_.push_back({HCCL_SEND, const_cast<void*>(x.data), x.bytes, HCCL_DATA_TYPE_INT8, uint32_t(x.peer)});
  }
  return api_.batchSendRecv(items_.data(), uint32_t(items_.size()), c, s);
}

// In bytes (HCCL_DATA_TYPE_INT8), as exchanges are: an element of any size travels. The counts stay in host
// memory, as HCCL reads them when the call is made.
int HcclLibrary::allToAllv(const void* in, void* out, const AllToAllvCounts& c, size_t esize, library::Handle h, library::Stream s) {
  const auto bytes = [esize](const std::vector<size_t>& elements, std::vector<uint64_t>& out) {
    out.clear();
    for (size_t n : elements) out.push_back(n * esize);
  };
  bytes(c.sendCounts, v_[0]);
  bytes(c.sendOffsets, v_[1]);
  bytes(c.recvCounts, v_[2]);
  bytes(c.recvOffsets, v_[3]);
  return api_.alltoallv(in, v_[0].data(), v_[1].data(), HCCL_DATA_TYPE_INT8, out, v_[2].data(), v_[3].data(), HCCL_DATA_TYPE_INT8, h, s);
}

bool HcclLibrary::asyncError(library::Handle c, int& result) {
  if (!api_.getCommAsyncError) return false;
  HcclResult async = HCCL_SUCCESS;
  if (HcclResult r = api_.getCommAsyncError(c, &async); r != HCCL_SUCCESS) {
    throw CommError(code::kHccl, "HCCL HcclGetCommAsyncError failed: " + hccl::describe(api_, r));
  }
  result = async;
  return true;
}

}  // namespace spmd::hccl
