#include "backends/nccl/nccl_api.h"

#include "backends/library/dynlib.h"

namespace spmd::nccl {
namespace {

constexpr const char* kWhat = "nccl";

Api open(const std::string& path) {
  void* lib = library::openLibrary(path, kWhat);
  Api a;
  a.path = path;
  auto need = [&](const char* name, auto& fn) { library::resolve(lib, name, fn, true, path, kWhat); };
  auto want = [&](const char* name, auto& fn) { library::resolve(lib, name, fn, false, path, kWhat); };
  need("ncclGetUniqueId", a.getUniqueId);
  need("ncclCommInitRank", a.commInitRank);
  need("ncclAllReduce", a.allReduce);
  need("ncclReduceScatter", a.reduceScatter);
  need("ncclAllGather", a.allGather);
  need("ncclBroadcast", a.broadcast);
  need("ncclReduce", a.reduce);
  need("ncclSend", a.send);
  need("ncclRecv", a.recv);
  need("ncclGroupStart", a.groupStart);
  need("ncclGroupEnd", a.groupEnd);
  need("ncclCommDestroy", a.commDestroy);
  want("ncclCommGetAsyncError", a.commGetAsyncError);
  want("ncclCommAbort", a.commAbort);
  want("ncclGetErrorString", a.getErrorString);
  want("ncclCommSplit", a.commSplit);
  want("ncclGetVersion", a.getVersion);
  return a;
}

}  // namespace

std::string Api::missingOptional() const {
  std::string out;
  library::noteMissing(out, commGetAsyncError, "ncclCommGetAsyncError");
  library::noteMissing(out, commAbort, "ncclCommAbort");
  library::noteMissing(out, getErrorString, "ncclGetErrorString");
  library::noteMissing(out, commSplit, "ncclCommSplit");
  return out;
}

std::string Api::version() const {
  int code = 0;
  if (!getVersion || getVersion(&code) != ncclSuccess) return "";
  // NCCL_VERSION_CODE: major*10000 + minor*100 + patch since 2.9, major*1000 + minor*100 + patch before.
  const int major = code >= 10000 ? code / 10000 : code / 1000, rest = code >= 10000 ? code % 10000 : code % 1000;
  return "NCCL " + std::to_string(major) + "." + std::to_string(rest / 100) + "." + std::to_string(rest % 100);
}

const Api& load(const std::string& path) { return library::loadOnce(path, &open); }

}  // namespace spmd::nccl
