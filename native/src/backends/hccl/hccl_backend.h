// The hccl backend: HCCL loaded at run time (hccl_api.h) under the shared library backend. Rank 0's root
// info reaches the others over the bootstrap; connect() joins with HcclCommInitRootInfo.
#pragma once
#include <memory>
#include <string>

#include "backends/hccl/hccl_types.h"
#include "runtime/backend.h"

namespace spmd::hccl {

struct HcclOptions {
  std::string library;  // soname or path
  HcclRootInfo root;
  int rank = 0, size = 1, localRank = 0;
};

// Loads the library (throws kUnsupported when it cannot); joins on connect().
std::unique_ptr<Backend> makeBackend(const HcclOptions& o);

// HcclGetRootInfo from `library`, for rank 0 to broadcast.
HcclRootInfo rootInfo(const std::string& library);

}  // namespace spmd::hccl
