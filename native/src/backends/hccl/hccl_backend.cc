#include "backends/hccl/hccl_backend.h"

#include "backends/hccl/hccl_library.h"
#include "backends/library/library_backend.h"
#include "base/error.h"

namespace spmd::hccl {
namespace {

void check(const Api& api, HcclResult r, const char* call) {
  if (r != HCCL_SUCCESS) throw CommError(code::kHccl, std::string("HCCL ") + call + " failed: " + describe(api, r));
}

}  // namespace

std::unique_ptr<Backend> makeBackend(const HcclOptions& o) {
  const Api& api = load(o.library);
  // HcclRootInfo is 4 KiB: held once, by the join that needs it.
  auto root = std::make_shared<HcclRootInfo>(o.root);
  // One lane: HCCL makes no other communicators here.
  auto join = [&api, root, o = o]() {
    auto device = library::makeAclDevice(o.localRank);
    HcclComm comm = nullptr;
    check(api, api.commInitRootInfo(uint32_t(o.size), root.get(), uint32_t(o.rank), &comm), "HcclCommInitRootInfo");
    std::vector<library::LibraryBackend::Joined> lanes;
    lanes.push_back({std::move(device), comm});
    return lanes;
  };
  return std::make_unique<library::LibraryBackend>("hccl", std::make_unique<HcclLibrary>(api), join, o.rank, o.size);
}

HcclRootInfo rootInfo(const std::string& library) {
  const Api& api = load(library);
  HcclRootInfo info{};
  check(api, api.getRootInfo(&info), "HcclGetRootInfo");
  return info;
}

}  // namespace spmd::hccl
