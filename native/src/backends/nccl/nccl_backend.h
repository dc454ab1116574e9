// The NCCL backend: NCCL loaded at run time (nccl_api.h), one communicator and one lane. Constructing it
// only loads the library; connect() (on the progress thread, which every CUDA and NCCL call stays on)
// picks the device and joins the other ranks with the unique id rank 0 made and the bootstrap sent.
#pragma once
#include <memory>
#include <string>

#include "backends/nccl/nccl_collectives.h"
#include "core/backend.h"

namespace spmd::nccl {

struct NcclOptions {
  std::string library;  // soname or path
  ncclUniqueId id;
  int rank = 0, size = 1, localRank = 0;
};

class NcclBackend : public Backend {
 public:
  explicit NcclBackend(const NcclOptions& o);
  ~NcclBackend() override;
  std::string name() const override { return "nccl"; }
  void connect() override;
  Collectives& lane(int) override;
  int lanes() const override { return 1; }

 private:
  NcclOptions o_;
  const Api& api_;
  // Destroyed in reverse: the lane's buffers, then the communicator, then the device (its stream).
  std::unique_ptr<Device> device_;
  std::unique_ptr<Comm> comm_;
  std::unique_ptr<NcclCollectives> lane_;
};

// ncclGetUniqueId from `library`, for rank 0 to broadcast.
ncclUniqueId uniqueId(const std::string& library);

}  // namespace spmd::nccl
