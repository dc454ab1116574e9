#include "backends/library/library_backend.h"

#include "base/error.h"

namespace spmd::library {

LibraryBackend::LibraryBackend(std::string name, std::unique_ptr<Library> lib, std::function<Joined()> join, int rank, int size)
    : name_(std::move(name)), lib_(std::move(lib)), join_(std::move(join)), rank_(rank), size_(size) {}

LibraryBackend::~LibraryBackend() {
  resident_.reset();
  lane_.reset();
  comm_.reset();
  device_.reset();
}

void LibraryBackend::connect() {
  Joined j = join_();
  device_ = std::move(j.device);
  comm_ = std::make_unique<Comm>(*lib_, j.handle);
  lane_ = std::make_unique<LibraryCollectives>(*comm_, *device_, rank_, size_);
  resident_ = std::make_unique<ResidentCollectives>(*lane_);
}

Collectives& LibraryBackend::lane(int) {
  requireConnected();
  return *lane_;
}

Memory& LibraryBackend::memory() {
  requireConnected();
  return *device_;
}

Collectives& LibraryBackend::deviceLane() {
  requireConnected();
  return *resident_;
}

void LibraryBackend::requireConnected() const {
  if (!lane_) throw CommError(code::kInvalid, name_ + ": the communicator is not connected");
}

}  // namespace spmd::library
