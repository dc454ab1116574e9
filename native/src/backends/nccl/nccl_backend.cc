#include "backends/nccl/nccl_backend.h"

#include "backends/library/library_backend.h"
#include "backends/nccl/nccl_error.h"
#include "backends/nccl/nccl_library.h"

namespace spmd::nccl {

std::unique_ptr<Backend> makeBackend(const NcclOptions& o) {
  const Api& api = load(o.library);
  // Each lane its own communicator and stream, so that streams overlap on the device as on the host
  // backends. Joined with fresh ids, not ncclCommSplit: a split may share its parent's resources (the
  // double runs a split's ops on its parent's thread, so two streams would wait on each other).
  auto join = [&api, o]() {
    std::vector<library::LibraryBackend::Joined> lanes;
    for (const ncclUniqueId& id : o.ids) {
      // The local rank's GPU (one GPU per rank on a node).
      auto device = library::makeCudaDevice(o.localRank);
      ncclComm_t comm = nullptr;
      check(api, api.commInitRank(&comm, o.size, id, o.rank), "ncclCommInitRank");
      lanes.push_back({std::move(device), comm});
    }
    return lanes;
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
