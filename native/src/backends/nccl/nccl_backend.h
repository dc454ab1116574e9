// The nccl backend: NCCL loaded at run time (nccl_api.h) under the shared library backend. Rank 0's
// unique ids, one per lane, reach the others over the bootstrap; connect() joins each lane's communicator
// with ncclCommInitRank.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backends/nccl/nccl_types.h"
#include "runtime/backend.h"

namespace spmd::nccl {

struct NcclOptions {
  std::string library;  // soname or path
  std::vector<ncclUniqueId> ids;  // one per lane (stream), the first for "main"; at most kMaxLanes
  int rank = 0, size = 1, localRank = 0;
};

// Loads the library (throws kUnsupported when it cannot); joins on connect().
std::unique_ptr<Backend> makeBackend(const NcclOptions& o);

// ncclGetUniqueId from `library`, for rank 0 to broadcast.
ncclUniqueId uniqueId(const std::string& library);

}  // namespace spmd::nccl
