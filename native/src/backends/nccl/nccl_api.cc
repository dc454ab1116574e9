#include "backends/nccl/nccl_api.h"

#include <dlfcn.h>

#include <map>
#include <memory>
#include <mutex>

#include "core/error.h"

namespace spmd::nccl {
namespace {

template <typename Fn>
void resolve(void* lib, const char* name, Fn& out, bool required, const std::string& path) {
  out = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!out && required) throw CommError(code::kUnsupported, "nccl: " + path + " lacks " + name + " (not an NCCL library?)");
}

Api open(const std::string& path) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    throw CommError(code::kUnsupported, "nccl: cannot load " + path + ": " + (why ? why : "dlopen failed"));
  }
  Api a;
  a.path = path;
  try {
    resolve(lib, "ncclGetUniqueId", a.getUniqueId, true, path);
    resolve(lib, "ncclCommInitRank", a.commInitRank, true, path);
    resolve(lib, "ncclAllReduce", a.allReduce, true, path);
    resolve(lib, "ncclReduceScatter", a.reduceScatter, true, path);
    resolve(lib, "ncclAllGather", a.allGather, true, path);
    resolve(lib, "ncclBroadcast", a.broadcast, true, path);
    resolve(lib, "ncclReduce", a.reduce, true, path);
    resolve(lib, "ncclSend", a.send, true, path);
    resolve(lib, "ncclRecv", a.recv, true, path);
    resolve(lib, "ncclGroupStart", a.groupStart, true, path);
    resolve(lib, "ncclGroupEnd", a.groupEnd, true, path);
    resolve(lib, "ncclCommDestroy", a.commDestroy, true, path);
    resolve(lib, "ncclCommGetAsyncError", a.commGetAsyncError, false, path);
    resolve(lib, "ncclCommAbort", a.commAbort, false, path);
    resolve(lib, "ncclGetErrorString", a.getErrorString, false, path);
    resolve(lib, "spmdDoubleStreamCreate", a.doubleStreamCreate, false, path);
    resolve(lib, "spmdDoubleStreamQuery", a.doubleStreamQuery, false, path);
    resolve(lib, "spmdDoubleStreamDestroy", a.doubleStreamDestroy, false, path);
  } catch (...) {
    dlclose(lib);  // nothing of it ran yet
    throw;
  }
  if (a.hostMemory() && (!a.doubleStreamCreate || !a.doubleStreamDestroy)) {
    throw CommError(code::kUnsupported, "nccl: " + path + " exports only part of the test double's stream functions");
  }
  return a;
}

}  // namespace

std::string Api::missingOptional() const {
  std::string out;
  auto note = [&out](bool present, const char* name) {
    if (!present) out += (out.empty() ? "" : ", ") + std::string(name);
  };
  note(commGetAsyncError, "ncclCommGetAsyncError");
  note(commAbort, "ncclCommAbort");
  note(getErrorString, "ncclGetErrorString");
  return out;
}

const Api& load(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Api>> loaded;
  std::lock_guard lock(mu);
  auto& slot = loaded[path];
  if (!slot) slot = std::make_unique<Api>(open(path));
  return *slot;
}

}  // namespace spmd::nccl
