// NCCL resolved at run time (backends/library/dynlib.h): the addon builds and loads on machines without
// NCCL or CUDA, and a job that asks for nccl there gets an error saying why.
#pragma once
#include <string>

#include "backends/nccl/nccl_types.h"

namespace spmd::nccl {

struct Api {
  std::string path;  // what was opened
  // Required: without any of these the library is refused.
  ncclGetUniqueId_fn getUniqueId = nullptr;
  ncclCommInitRank_fn commInitRank = nullptr;
  ncclAllReduce_fn allReduce = nullptr;
  ncclReduceScatter_fn reduceScatter = nullptr;
  ncclAllGather_fn allGather = nullptr;
  ncclBroadcast_fn broadcast = nullptr;
  ncclReduce_fn reduce = nullptr;
  ncclSend_fn send = nullptr;
  ncclRecv_fn recv = nullptr;
  ncclGroupStart_fn groupStart = nullptr;
  ncclGroupEnd_fn groupEnd = nullptr;
  ncclCommDestroy_fn commDestroy = nullptr;
  // Optional: missing ones degrade (no async error polling; no abort, so a deadline leaves the
  // communicator to the process exit; numeric error names; no sub-communicators, NCCL before 2.18).
  ncclCommGetAsyncError_fn commGetAsyncError = nullptr;
  ncclCommAbort_fn commAbort = nullptr;
  ncclGetErrorString_fn getErrorString = nullptr;
  ncclCommSplit_fn commSplit = nullptr;
  // For the results' manifest only: its absence degrades nothing, so it is not listed as missing.
  ncclGetVersion_fn getVersion = nullptr;
  // The optional symbols this library lacks, for `runner info` and the log ("" when none).
  std::string missingOptional() const;
  // "NCCL 2.21.5" from ncclGetVersion, or "" without it.
  std::string version() const;
};

// Opens `path` (a soname or a file) once per process and resolves the symbols; throws CommError
// kUnsupported naming the path and dlerror() or the missing symbol.
const Api& load(const std::string& path);

}  // namespace spmd::nccl
