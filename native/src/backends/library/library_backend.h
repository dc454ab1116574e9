// A backend over a vendor collective library (nccl, hccl): one lane per communicator the join made, each
// over host pointers (lane()) and over its device's memory (deviceLane(), memory()), where the job's
// tensors live. Constructing it only loads the library; connect() (on the progress thread, which every
// device and vendor call of lane 0 stays on, since device selection is per thread) picks the device and
// joins the other ranks, with what the vendor's root made and the bootstrap carried. The other lanes'
// workers select their lane's device first (enterLane).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/library/resident_collectives.h"
#include "runtime/backend.h"

namespace spmd::library {

class LibraryBackend : public Backend {
 public:
  // One lane's device (its own stream) and communicator.
  struct Joined {
    std::unique_ptr<Device> device;
    Handle handle;
  };
  // `join`: the vendor's device choice and init of every lane, blocking until every rank joined.
  LibraryBackend(std::string name, std::unique_ptr<Library> lib, std::function<std::vector<Joined>()> join, int rank, int size);
  ~LibraryBackend() override;
  std::string name() const override { return name_; }
  void connect() override;
  Collectives& lane(int i) override { return *at(i).host; }
  int lanes() const override { return lanes_.empty() ? 1 : int(lanes_.size()); }
  Memory& memory() override { return laneMemory(0); }
  Memory& laneMemory(int i) override { return *at(i).device; }
  Collectives& deviceLane(int i) override { return *at(i).resident; }
  void enterLane(int i) override { at(i).device->select(); }

 private:
  // Torn down in reverse order: the lane's buffers, its communicator, its device (its stream).
  struct Lane {
    std::unique_ptr<Device> device;
    std::unique_ptr<Comm> comm;
    std::unique_ptr<LibraryCollectives> host;
    std::unique_ptr<ResidentCollectives> resident;
  };
  Lane& at(int i);

  std::string name_;
  std::unique_ptr<Library> lib_;
  std::function<std::vector<Joined>()> join_;
  int rank_, size_;
  std::vector<Lane> lanes_;
};

}  // namespace spmd::library
