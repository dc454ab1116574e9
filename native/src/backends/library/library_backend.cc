#include "backends/library/library_backend.h"

#include "base/error.h"

namespace spmd::library {

LibraryBackend::LibraryBackend(std::string name, std::unique_ptr<Library> lib, std::function<std::vector<Joined>()> join, int rank,
                               int size)
    : name_(std::move(name)), lib_(std::move(lib)), join_(std::move(join)), rank_(rank), size_(size) {}

LibraryBackend::~LibraryBackend() = default;

void LibraryBackend::connect() {
  std::vector<Joined> joined = join_();
  for (Joined& j : joined) {
    Lane& l = lanes_.emplace_back();
    l.device = std::move(j.device);
    l.comm = std::make_unique<Comm>(*lib_, j.handle);
    l.host = std::make_unique<LibraryCollectives>(*l.comm, *l.device, rank_, size_);
    l.resident = std::make_unique<ResidentCollectives>(*l.host);
  }
}

LibraryBackend::Lane& LibraryBackend::at(int i) {
  if (lanes_.empty()) throw CommError(code::kInvalid, name_ + ": the communicator is not connected");
  return lanes_.at(size_t(i));
}

}  // namespace spmd::library
