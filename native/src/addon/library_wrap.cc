#include "addon/library_wrap.h"

#include <cstring>
#include <string>
#include <vector>

#include "addon/errors.h"
#include "backends/hccl/hccl_api.h"
#include "backends/hccl/hccl_backend.h"
#include "backends/library/device.h"
#include "backends/nccl/nccl_api.h"
#include "backends/nccl/nccl_backend.h"
#include "base/error.h"

namespace spmd::addon {
namespace {

// What the addon needs of each vendor, so that the module functions are written once.
struct Vendor {
  const char* backend;
  size_t idBytes;
  int maxIds;  // ids a Communicator takes: one per lane (nccl), or one
  std::string (*id)(const std::string& library);  // the root's id, as bytes
  // What a library that loads is: the optional symbols it lacks, its version ("" unknown).
  void (*probe)(const std::string& library, std::string& missing, std::string& version);
  // The memory of device `index`, with the library loaded first (its runtime may come with it).
  library::DeviceMemoryInfo (*memory)(const std::string& library, int index);
  std::unique_ptr<Backend> (*start)(const std::string& library, const std::string& id, int rank, int size, int localRank);
};

template <typename T>
std::string bytesOf(const T& v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof v);
}

// The `i`th T in `b`.
template <typename T>
T fromBytes(const std::string& b, size_t i = 0) {
  T v;
  std::memcpy(&v, b.data() + i * sizeof v, sizeof v);
  return v;
}

std::vector<ncclUniqueId> ncclIds(const std::string& b) {
  std::vector<ncclUniqueId> ids;
  for (size_t i = 0; i < b.size() / sizeof(ncclUniqueId); ++i) ids.push_back(fromBytes<ncclUniqueId>(b, i));
  return ids;
}

const Vendor kVendors[] = {
    {"nccl", sizeof(ncclUniqueId), kMaxLanes, [](const std::string& lib) { return bytesOf(nccl::uniqueId(lib)); },
     [](const std::string& lib, std::string& missing, std::string& version) {
       const nccl::Api& api = nccl::load(lib);
       missing = api.missingOptional();
       version = api.version();
     },
     [](const std::string& lib, int index) {
       nccl::load(lib);
       return library::cudaMemoryInfo(index);
     },
     [](const std::string& lib, const std::string& id, int rank, int size, int localRank) {
       return nccl::makeBackend({lib, ncclIds(id), rank, size, localRank});
     }},
    {"hccl", sizeof(HcclRootInfo), 1, [](const std::string& lib) { return bytesOf(hccl::rootInfo(lib)); },
     [](const std::string& lib, std::string& missing, std::string& /*version*/) {
       const hccl::Api& api = hccl::load(lib);  // HCCL's API has no version call
       missing = api.missingOptional();
     },
     [](const std::string& lib, int index) {
       hccl::load(lib);
       return library::aclMemoryInfo(index);
     },
     [](const std::string& lib, const std::string& id, int rank, int size, int localRank) {
       return hccl::makeBackend({lib, fromBytes<HcclRootInfo>(id), rank, size, localRank});
     }},
};

const Vendor* find(const std::string& backend) {
  for (const Vendor& v : kVendors) {
    if (backend == v.backend) return &v;
  }
  return nullptr;
}

const Vendor& vendorArg(const Napi::CallbackInfo& info) {
  const Vendor* v = info[0].IsString() ? find(info[0].As<Napi::String>().Utf8Value()) : nullptr;
  if (!v) throwInvalid(info.Env(), "expected a library backend (\"nccl\" or \"hccl\")");
  if (!info[1].IsString()) throwInvalid(info.Env(), std::string(v->backend) + ": expected the library path");
  return *v;
}

Napi::Value libraryId(const Napi::CallbackInfo& info) {
  const Vendor& v = vendorArg(info);
  try {
    const std::string id = v.id(info[1].As<Napi::String>().Utf8Value());
    return Napi::Buffer<char>::Copy(info.Env(), id.data(), id.size());
  } catch (const CommError& e) {
    throw makeError(info.Env(), e.code(), e.what());
  }
}

// { missing, version } for a library that loads; throws what loading throws otherwise.
Napi::Value libraryProbe(const Napi::CallbackInfo& info) {
  const Vendor& v = vendorArg(info);
  try {
    std::string missing, version;
    v.probe(info[1].As<Napi::String>().Utf8Value(), missing, version);
    Napi::Object out = Napi::Object::New(info.Env());
    out.Set("missing", missing);
    out.Set("version", version);
    return out;
  } catch (const CommError& e) {
    throw makeError(info.Env(), e.code(), e.what());
  }
}

// { free, total, call } of device `index` (a GPU's for nccl, an NPU's for hccl); throws why it cannot say.
Napi::Value deviceMemory(const Napi::CallbackInfo& info) {
  const Vendor& v = vendorArg(info);
  if (!info[2].IsNumber()) throwInvalid(info.Env(), std::string(v.backend) + ": expected the device index");
  try {
    const library::DeviceMemoryInfo m = v.memory(info[1].As<Napi::String>().Utf8Value(), info[2].As<Napi::Number>().Int32Value());
    Napi::Object out = Napi::Object::New(info.Env());
    out.Set("free", double(m.free));
    out.Set("total", double(m.total));
    out.Set("call", m.call);
    return out;
  } catch (const CommError& e) {
    throw makeError(info.Env(), e.code(), e.what());
  }
}

}  // namespace

void defineLibraries(Napi::Env env, Napi::Object exports) {
  exports.Set("libraryId", Napi::Function::New<libraryId>(env, "libraryId"));
  exports.Set("libraryProbe", Napi::Function::New<libraryProbe>(env, "libraryProbe"));
  exports.Set("deviceMemory", Napi::Function::New<deviceMemory>(env, "deviceMemory"));
}

bool isLibraryBackend(const std::string& kind) { return find(kind) != nullptr; }

std::unique_ptr<Backend> startLibraryBackend(const std::string& kind, const OptionReader& o, int rank, int size) {
  const Vendor& v = *find(kind);
  Napi::Value id = o.value("id");
  const size_t length = id.IsBuffer() ? id.As<Napi::Buffer<char>>().Length() : 0;
  if (length == 0 || length % v.idBytes != 0 || length / v.idBytes > size_t(v.maxIds)) {
    o.fail("id", "a Buffer of " + std::to_string(v.idBytes) + " bytes" +
                     (v.maxIds > 1 ? " per lane (at most " + std::to_string(v.maxIds) + ")" : ""));
  }
  const auto buf = id.As<Napi::Buffer<char>>();
  const int localRank = int(o.integer("localRank", 0, size - 1));
  try {
    return v.start(o.string("library"), std::string(buf.Data(), buf.Length()), rank, size, localRank);
  } catch (const CommError& e) {
    throw makeError(o.env(), e.code(), e.what());
  }
}

}  // namespace spmd::addon
