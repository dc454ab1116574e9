#include "backends/hccl/hccl_api.h"

#include "backends/library/dynlib.h"

namespace spmd::hccl {
namespace {

constexpr const char* kWhat = "hccl";

Api open(const std::string& path) {
  void* lib = library::openLibrary(path, kWhat);
  Api a;
  a.path = path;
  auto need = [&](const char* name, auto& fn) { library::resolve(lib, name, fn, true, path, kWhat); };
  auto want = [&](const char* name, auto& fn) { library::resolve(lib, name, fn, false, path, kWhat); };
  need("HcclGetRootInfo", a.getRootInfo);
  need("HcclCommInitRootInfo", a.commInitRootInfo);
  need("HcclAllReduce", a.allReduce);
  need("HcclReduceScatter", a.reduceScatter);
  need("HcclAllGather", a.allGather);
  need("HcclBroadcast", a.broadcast);
  need("HcclReduce", a.reduce);
  need("HcclBatchSendRecv", a.batchSendRecv);
  need("HcclCommDestroy", a.commDestroy);
  want("HcclGetCommAsyncError", a.getCommAsyncError);
  want("HcclGetErrorString", a.getErrorString);
  want("HcclAlltoAllV", a.alltoallv);
  return a;
}

}  // namespace

std::string Api::missingOptional() const {
  std::string out;
  library::noteMissing(out, getCommAsyncError, "HcclGetCommAsyncError");
  library::noteMissing(out, getErrorString, "HcclGetErrorString");
  library::noteMissing(out, alltoallv, "HcclAlltoAllV");
  return out;
}

const Api& load(const std::string& path) { return library::loadOnce(path, &open); }

}  // namespace spmd::hccl
