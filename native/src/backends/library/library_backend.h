// A backend over a vendor collective library (nccl, hccl): one lane, over host pointers (lane()) and over
// its device's memory (deviceLane(), memory()), where the job's tensors live. Constructing it only loads the
// library; connect() (on the progress thread, which every device and vendor call stays on, since device
// selection is per thread) picks the device and joins the other ranks, with what the vendor's root
// made and the bootstrap carried.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "backends/library/resident_collectives.h"
#include "runtime/backend.h"

namespace spmd::library {

class LibraryBackend : public Backend {
 public:
  struct Joined {
    std::unique_ptr<Device> device;
    Handle handle;
  };
  // `join`: the vendor's device choice and init, blocking until every rank joined.
  LibraryBackend(std::string name, std::unique_ptr<Library> lib, std::function<Joined()> join, int rank, int size);
  ~LibraryBackend() override;
  std::string name() const override { return name_; }
  void connect() override;
  Collectives& lane(int) override;
  int lanes() const override { return 1; }
  Memory& memory() override;
  Collectives& deviceLane() override;

 private:
  void requireConnected() const;

  std::string name_;
  std::unique_ptr<Library> lib_;
  std::function<Joined()> join_;
  int rank_, size_;
  // Torn down in this order: the lanes' buffers, the communicator, the device (its stream).
  std::unique_ptr<Device> device_;
  std::unique_ptr<Comm> comm_;
  std::unique_ptr<LibraryCollectives> lane_;
  std::unique_ptr<ResidentCollectives> resident_;
};

}  // namespace spmd::library
