// HCCL resolved at run time (backends/library/dynlib.h): the addon builds and loads without CANN.
#pragma once
#include <string>

#include "backends/hccl/hccl_types.h"

namespace spmd::hccl {

struct Api {
  std::string path;
  // Required.
  HcclGetRootInfo_fn getRootInfo = nullptr;
  HcclCommInitRootInfo_fn commInitRootInfo = nullptr;
  HcclAllReduce_fn allReduce = nullptr;
  HcclReduceScatter_fn reduceScatter = nullptr;
  HcclAllGather_fn allGather = nullptr;
  HcclBroadcast_fn broadcast = nullptr;
  HcclReduce_fn reduce = nullptr;
  HcclBatchSendRecv_fn batchSendRecv = nullptr;
  HcclCommDestroy_fn commDestroy = nullptr;
  // Optional (newer CANN): without them no async error polling, numeric error names.
  HcclGetCommAsyncError_fn getCommAsyncError = nullptr;
  HcclGetErrorString_fn getErrorString = nullptr;
  HcclAlltoAllV_fn alltoallv = nullptr;  // else all_to_allv runs as HcclBatchSendRecv
  std::string missingOptional() const;
};

// Opens `path` once per process; throws CommError kUnsupported naming the path and why.
const Api& load(const std::string& path);

}  // namespace spmd::hccl
