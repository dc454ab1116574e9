#include "backends/nccl/nccl_backend.h"

#include "backends/library/library_backend.h"
#include "backends/nccl/nccl_error.h"
#include "backends/nccl/nccl_library.h"

namespace spmd::nccl {

std::unique_ptr<Backend> makeBackend(const NcclOptions& o) {
  const Api& api = load(o.library);
  auto join = [&api, o]() -> library::LibraryBackend::Joined {
    // The double's memory is the host's; on a GPU, the local rank's device (one GPU per rank on a node).
    auto device = api.hostMemory() ? library::makeHostDevice(api.doubleStreams) : library::makeCudaDevice(o.localRank);
    ncclComm_t comm = nullptr;
    check(api, api.commInitRank(&comm, o.size, o.id, o.rank), "ncclCommInitRank");
    return {std::move(device), comm};
  };
  return std::make_unique<library::LibraryBackend>("nccl", std::make_unique<NcclLibrary>(api), join, o.rank, o.size);
}

ncclUniqueId uniqueId(const std::string& library) {
  const Api& api = load(library);
  ncclUniqueId id{};
  check(api, api.getUniqueId(&id), "ncclGetUniqueId");
  return id;
}

}  // namespace spmd::nccl
