// The part of HCCL's C ABI (Huawei CANN) this project uses, declared here from HCCL's public API
// documentation: its result, datatype and reduction enums (whose values differ from NCCL's), the
// 4108-byte root info, and the functions' signatures. The backend resolves them with dlsym at run time;
// the test double (test/doubles/hccl) implements them.
#pragma once
#include <cstdint>

extern "C" {

typedef enum {
  HCCL_SUCCESS = 0,
  HCCL_E_PARA = 1,
  HCCL_E_PTR = 2,
  HCCL_E_MEMORY = 3,
  HCCL_E_INTERNAL = 4,
  HCCL_E_NOT_SUPPORT = 5,
  HCCL_E_NOT_FOUND = 6,
  HCCL_E_UNAVAIL = 7,
  HCCL_E_SYSCALL = 8,
  HCCL_E_TIMEOUT = 9,
  HCCL_E_OPEN_FILE_FAILURE = 10,
  HCCL_E_TCP_CONNECT = 11,
  HCCL_E_ROCE_CONNECT = 12,
  HCCL_E_TCP_TRANSFER = 13,
  HCCL_E_ROCE_TRANSFER = 14,
  HCCL_E_RUNTIME = 15,
  HCCL_E_DRV = 16,
  HCCL_E_PROFILING = 17,
  HCCL_E_CCE = 18,
  HCCL_E_NETWORK = 19,
  HCCL_E_AGAIN = 20,
  HCCL_E_REMOTE = 21,
} HcclResult;

typedef enum {
  HCCL_DATA_TYPE_INT8 = 0,
  HCCL_DATA_TYPE_INT16 = 1,
  HCCL_DATA_TYPE_INT32 = 2,
  HCCL_DATA_TYPE_FP16 = 3,
  HCCL_DATA_TYPE_FP32 = 4,
  HCCL_DATA_TYPE_INT64 = 5,
  HCCL_DATA_TYPE_UINT64 = 6,
  HCCL_DATA_TYPE_UINT8 = 7,
  HCCL_DATA_TYPE_UINT16 = 8,
  HCCL_DATA_TYPE_UINT32 = 9,
  HCCL_DATA_TYPE_FP64 = 10,
  HCCL_DATA_TYPE_BFP16 = 11,
} HcclDataType;

typedef enum { HCCL_REDUCE_SUM = 0, HCCL_REDUCE_PROD = 1, HCCL_REDUCE_MAX = 2, HCCL_REDUCE_MIN = 3 } HcclReduceOp;

#define SPMD_HCCL_ROOT_INFO_BYTES 4108
typedef struct {
  char internal[SPMD_HCCL_ROOT_INFO_BYTES];
} HcclRootInfo;

typedef void* HcclComm;
typedef void* aclrtStream;

typedef enum { HCCL_SEND = 0, HCCL_RECV = 1 } HcclSendRecvType;
typedef struct {
  HcclSendRecvType sendRecvType;
  void* buf;
  uint64_t count;
  HcclDataType dataType;
  uint32_t remoteRank;
} HcclSendRecvItem;

typedef HcclResult (*HcclGetRootInfo_fn)(HcclRootInfo* rootInfo);
typedef HcclResult (*HcclCommInitRootInfo_fn)(uint32_t nRanks, const HcclRootInfo* rootInfo, uint32_t rank, HcclComm* comm);
typedef HcclResult (*HcclAllReduce_fn)(void* send, void* recv, uint64_t count, HcclDataType dt, HcclReduceOp op, HcclComm comm,
                                       aclrtStream stream);
typedef HcclResult (*HcclReduceScatter_fn)(void* send, void* recv, uint64_t recvCount, HcclDataType dt, HcclReduceOp op,
                                           HcclComm comm, aclrtStream stream);
typedef HcclResult (*HcclAllGather_fn)(void* send, void* recv, uint64_t sendCount, HcclDataType dt, HcclComm comm,
                                       aclrtStream stream);
typedef HcclResult (*HcclBroadcast_fn)(void* buf, uint64_t count, HcclDataType dt, uint32_t root, HcclComm comm,
                                       aclrtStream stream);
typedef HcclResult (*HcclReduce_fn)(void* send, void* recv, uint64_t count, HcclDataType dt, HcclReduceOp op, uint32_t root,
                                    HcclComm comm, aclrtStream stream);
typedef HcclResult (*HcclBatchSendRecv_fn)(HcclSendRecvItem* items, uint32_t itemNum, HcclComm comm, aclrtStream stream);
// Counts and displacements: uint64_t arrays in host memory, in elements of the datatypes.
typedef HcclResult (*HcclAlltoAllV_fn)(const void* send, const void* sendCounts, const void* sdispls, HcclDataType sendType,
                                       const void* recv, const void* recvCounts, const void* rdispls, HcclDataType recvType,
                                       HcclComm comm, aclrtStream stream);
typedef HcclResult (*HcclCommDestroy_fn)(HcclComm comm);
typedef HcclResult (*HcclGetCommAsyncError_fn)(HcclComm comm, HcclResult* asyncError);
typedef const char* (*HcclGetErrorString_fn)(HcclResult code);
}
