// The nccl backend: NCCL loaded at run time (nccl_api.h) under the shared library backend. Rank 0's
// unique id reaches the others over the bootstrap; connect() joins with ncclCommInitRank.
#pragma once
#include <memory>
#include <string>

#include "backends/nccl/nccl_types.h"
#include "runtime/backend.h"

namespace spmd::nccl {

struct NcclOptions {
  std::string library;  // soname or path
  ncclUniqueId id;
  int rank = 0, size = 1, localRank = 0;
};

// Loads the library (throws kUnsupported when it cannot); joins on connect().
std::unique_ptr<Backend> makeBackend(const NcclOptions& o);

// ncclGetUniqueId from `library`, for rank 0 to broadcast.
ncclUniqueId uniqueId(const std::string& library);

}  // namespace spmd::nccl
