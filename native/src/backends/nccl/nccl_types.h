// The part of NCCL's C ABI this project uses, declared here from NCCL's public API documentation (no NCCL
// header is needed to build): the enums' values, the 128-byte unique id, and the functions' signatures.
// The backend resolves them with dlsym at run time; the test double (test/doubles/nccl) implements them.
#pragma once
#include <cstddef>

extern "C" {

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
} ncclResult_t;

typedef enum {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9,
} ncclDataType_t;

typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 } ncclRedOp_t;

#define SPMD_NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[SPMD_NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef struct ncclComm* ncclComm_t;
// ncclConfig_t: only ever passed as NULL here (a split inherits its parent's configuration).
typedef struct ncclConfig ncclConfig_t;
#define SPMD_NCCL_SPLIT_NOCOLOR (-1)
typedef struct CUstream_st* cudaStream_t;

typedef ncclResult_t (*ncclGetUniqueId_fn)(ncclUniqueId* id);
typedef ncclResult_t (*ncclCommInitRank_fn)(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank);
typedef ncclResult_t (*ncclAllReduce_fn)(const void* send, void* recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                                         ncclComm_t comm, cudaStream_t stream);
typedef ncclResult_t (*ncclReduceScatter_fn)(const void* send, void* recv, size_t recvCount, ncclDataType_t dt,
                                             ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
typedef ncclResult_t (*ncclAllGather_fn)(const void* send, void* recv, size_t sendCount, ncclDataType_t dt,
                                         ncclComm_t comm, cudaStream_t stream);
typedef ncclResult_t (*ncclBroadcast_fn)(const void* send, void* recv, size_t count, ncclDataType_t dt, int root,
                                         ncclComm_t comm, cudaStream_t stream);
typedef ncclResult_t (*ncclReduce_fn)(const void* send, void* recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                                      int root, ncclComm_t comm, cudaStream_t stream);
typedef ncclResult_t (*ncclSend_fn)(const void* send, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,
                                    cudaStream_t stream);
typedef ncclResult_t (*ncclRecv_fn)(void* recv, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,
                                    cudaStream_t stream);
typedef ncclResult_t (*ncclGroupStart_fn)();
typedef ncclResult_t (*ncclGroupEnd_fn)();
typedef ncclResult_t (*ncclCommGetAsyncError_fn)(ncclComm_t comm, ncclResult_t* asyncError);
typedef ncclResult_t (*ncclCommAbort_fn)(ncclComm_t comm);
typedef ncclResult_t (*ncclCommDestroy_fn)(ncclComm_t comm);
typedef ncclResult_t (*ncclCommSplit_fn)(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);
typedef const char* (*ncclGetErrorString_fn)(ncclResult_t result);
typedef ncclResult_t (*ncclGetVersion_fn)(int* version);
}
