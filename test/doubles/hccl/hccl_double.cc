// A test double for HCCL: the subset of HCCL's C ABI the backend uses (as declared in
// native/src/backends/hccl/hccl_types.h), on host memory, over the doubles' engine (common/). Loaded only
// when a test names it in HCCL_LIBRARY. HCCL documents no abort, so neither has this double.
#include <cstring>
#include <vector>

#include "backends/hccl/hccl_types.h"
#include "common/double_comm.h"

using spmd::doubles::DoubleComm;

namespace {

DoubleComm* engine(HcclComm c) { return static_cast<DoubleComm*>(c); }

bool reduction(HcclDataType t, spmd::DType& out) {
  switch (t) {
    case HCCL_DATA_TYPE_FP32: out = spmd::DType::F32; return true;
    case HCCL_DATA_TYPE_FP64: out = spmd::DType::F64; return true;
    case HCCL_DATA_TYPE_INT32: out = spmd::DType::I32; return true;
    case HCCL_DATA_TYPE_INT64: out = spmd::DType::I64; return true;
    default: return false;
  }
}

size_t sizeOf(HcclDataType t) {
  switch (t) {
    case HCCL_DATA_TYPE_INT8: case HCCL_DATA_TYPE_UINT8: return 1;
    case HCCL_DATA_TYPE_INT16: case HCCL_DATA_TYPE_UINT16: case HCCL_DATA_TYPE_FP16: case HCCL_DATA_TYPE_BFP16: return 2;
    case HCCL_DATA_TYPE_INT32: case HCCL_DATA_TYPE_UINT32: case HCCL_DATA_TYPE_FP32: return 4;
    default: return 8;
  }
}

bool redOp(HcclReduceOp op, spmd::RedOp& out) {
  switch (op) {
    case HCCL_REDUCE_SUM: out = spmd::RedOp::Sum; return true;
    case HCCL_REDUCE_MAX: out = spmd::RedOp::Max; return true;
    case HCCL_REDUCE_MIN: out = spmd::RedOp::Min; return true;
    default: return false;
  }
}

template <typename Op>
HcclResult enqueue(HcclComm comm, aclrtStream stream, Op op) {
  return engine(comm)->enqueue(stream, op) ? HCCL_SUCCESS : HCCL_E_PARA;
}

}  // namespace

SPMD_DOUBLE_EXPORT HcclResult HcclGetRootInfo(HcclRootInfo* info) {
  std::memset(info, 0, sizeof *info);
  const std::string name = DoubleComm::newName();
  std::memcpy(info->internal, name.c_str(), name.size());
  return HCCL_SUCCESS;
}

SPMD_DOUBLE_EXPORT HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo* info, uint32_t rank, HcclComm* comm) {
  auto e = DoubleComm::join(std::string(info->internal, strnlen(info->internal, sizeof info->internal)), int(nRanks), int(rank));
  if (!e) return HCCL_E_INTERNAL;
  *comm = e.release();
  return HCCL_SUCCESS;
}

SPMD_DOUBLE_EXPORT HcclResult HcclAllReduce(void* send, void* recv, uint64_t count, HcclDataType dt, HcclReduceOp op,
                                            HcclComm comm, aclrtStream stream) {
  spmd::DType t;
  spmd::RedOp o;
  if (!reduction(dt, t) || !redOp(op, o)) return HCCL_E_PARA;
  DoubleComm* e = engine(comm);
  return enqueue(comm, stream, [=] { e->algorithms().allreduce(send, recv, count, t, o, spmd::Algo::Auto); });
}

SPMD_DOUBLE_EXPORT HcclResult HcclReduceScatter(void* send, void* recv, uint64_t recvCount, HcclDataType dt,
                                                HcclReduceOp op, HcclComm comm, aclrtStream stream) {
  spmd::DType t;
  spmd::RedOp o;
  if (!reduction(dt, t) || !redOp(op, o)) return HCCL_E_PARA;
  DoubleComm* e = engine(comm);
  const size_t count = recvCount * size_t(e->size());
  return enqueue(comm, stream, [=] { e->algorithms().reduceScatter(send, recv, count, t, o, spmd::Algo::Auto); });
}

SPMD_DOUBLE_EXPORT HcclResult HcclAllGather(void* send, void* recv, uint64_t sendCount, HcclDataType dt, HcclComm comm,
                                            aclrtStream stream) {
  DoubleComm* e = engine(comm);
  const size_t bytes = sendCount * sizeOf(dt);
  return enqueue(comm, stream, [=] { e->algorithms().allGather(send, recv, bytes, spmd::Algo::Auto); });
}

SPMD_DOUBLE_EXPORT HcclResult HcclBroadcast(void* buf, uint64_t count, HcclDataType dt, uint32_t root, HcclComm comm,
                                            aclrtStream stream) {
  DoubleComm* e = engine(comm);
  const size_t bytes = count * sizeOf(dt);
  return enqueue(comm, stream, [=] { e->algorithms().broadcast(buf, bytes, int(root), spmd::Algo::Auto); });
}

SPMD_DOUBLE_EXPORT HcclResult HcclReduce(void* send, void* recv, uint64_t count, HcclDataType dt, HcclReduceOp op,
                                         uint32_t root, HcclComm comm, aclrtStream stream) {
  spmd::DType t;
  spmd::RedOp o;
  if (!reduction(dt, t) || !redOp(op, o)) return HCCL_E_PARA;
  DoubleComm* e = engine(comm);
  return enqueue(comm, stream, [=] { e->algorithms().reduce(send, recv, count, t, o, int(root), spmd::Algo::Auto); });
}

SPMD_DOUBLE_EXPORT HcclResult HcclBatchSendRecv(HcclSendRecvItem* items, uint32_t itemNum, HcclComm comm, aclrtStream stream) {
  std::vector<spmd::SendSpec> sends;
  std::vector<spmd::RecvSpec> recvs;
  for (uint32_t i = 0; i < itemNum; ++i) {
    const HcclSendRecvItem& it = items[i];
    const size_t bytes = it.count * sizeOf(it.dataType);
    if (it.sendRecvType == HCCL_SEND) {
      sends.push_back({int(it.remoteRank), it.buf, bytes});
    } else {
      recvs.push_back({int(it.remoteRank), it.buf, bytes});
    }
  }
  DoubleComm* e = engine(comm);
  return enqueue(comm, stream, [e, sends = std::move(sends), recvs = std::move(recvs)] { e->transport().exchange(sends, recvs); });
}

// The counts and displacements (uint64_t, in elements of their types) are read now, as HCCL reads them when
// called; the blocks move as bytes over the engine's direct algorithm, which skips empty ones.
SPMD_DOUBLE_EXPORT HcclResult HcclAlltoAllV(const void* send, const void* sendCounts, const void* sdispls, HcclDataType sendType,
                                            const void* recv, const void* recvCounts, const void* rdispls, HcclDataType recvType,
                                            HcclComm comm, aclrtStream stream) {
  DoubleComm* e = engine(comm);
  const auto W = size_t(e->size());
  const auto bytes = [W](const void* from, HcclDataType t, std::vector<size_t>& to) {
    const auto* v = static_cast<const uint64_t*>(from);
    for (size_t j = 0; j < W; ++j) to.push_back(size_t(v[j]) * sizeOf(t));
  };
  spmd::AllToAllvCounts c;
  bytes(sendCounts, sendType, c.sendCounts);
  bytes(sdispls, sendType, c.sendOffsets);
  bytes(recvCounts, recvType, c.recvCounts);
  bytes(rdispls, recvType, c.recvOffsets);
  return enqueue(comm, stream, [=] { e->algorithms().allToAllv(send, const_cast<void*>(recv), c, 1, spmd::Algo::Auto); });
}

SPMD_DOUBLE_EXPORT HcclResult HcclGetCommAsyncError(HcclComm comm, HcclResult* asyncError) {
  *asyncError = engine(comm)->asyncFault() || engine(comm)->failed() ? HCCL_E_REMOTE : HCCL_SUCCESS;
  return HCCL_SUCCESS;
}

SPMD_DOUBLE_EXPORT const char* HcclGetErrorString(HcclResult r) {
  switch (r) {
    case HCCL_SUCCESS: return "no error";
    case HCCL_E_INTERNAL: return "internal error (double: SPMD_DOUBLE_FAIL_INIT or shm failure)";
    case HCCL_E_REMOTE: return "remote error (double)";
    case HCCL_E_PARA: return "parameter error (double)";
    default: return "error (double)";
  }
}

SPMD_DOUBLE_EXPORT HcclResult HcclCommDestroy(HcclComm comm) {
  delete engine(comm);
  return HCCL_SUCCESS;
}
