#include "backends/nccl/nccl_backend.h"

#include "backends/nccl/nccl_error.h"
#include "core/error.h"

namespace spmd::nccl {

NcclBackend::NcclBackend(const NcclOptions& o) : o_(o), api_(load(o.library)) {}

NcclBackend::~NcclBackend() {
  lane_.reset();
  comm_.reset();
  device_.reset();
}

void NcclBackend::connect() {
  device_ = makeDevice(api_, o_.localRank);
  comm_ = std::make_unique<Comm>(api_, o_.id, o_.rank, o_.size);
  lane_ = std::make_unique<NcclCollectives>(*comm_, *device_, o_.rank, o_.size);
}

Collectives& NcclBackend::lane(int) {
  if (!lane_) throw CommError(code::kInvalid, "nccl: the communicator is not connected");
  return *lane_;
}

ncclUniqueId uniqueId(const std::string& library) {
  const Api& api = load(library);
  ncclUniqueId id{};
  check(api, api.getUniqueId(&id), "ncclGetUniqueId");
  return id;
}

}  // namespace spmd::nccl
