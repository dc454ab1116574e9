#include "addon/nccl_wrap.h"

#include <cstring>

#include "addon/errors.h"
#include "core/error.h"

namespace spmd::addon {
namespace {

std::string libraryArg(const Napi::CallbackInfo& info) {
  if (!info[0].IsString()) throwInvalid(info.Env(), "nccl: expected the library path");
  return info[0].As<Napi::String>().Utf8Value();
}

Napi::Value uniqueId(const Napi::CallbackInfo& info) {
  try {
    const ncclUniqueId id = nccl::uniqueId(libraryArg(info));
    return Napi::Buffer<char>::Copy(info.Env(), id.internal, sizeof id.internal);
  } catch (const CommError& e) {
    throw makeError(info.Env(), e.code(), e.what());
  }
}

// { path, hostMemory, missing } for a library that loads; throws what load() throws otherwise.
Napi::Value probe(const Napi::CallbackInfo& info) {
  try {
    const nccl::Api& api = nccl::load(libraryArg(info));
    Napi::Object out = Napi::Object::New(info.Env());
    out.Set("path", api.path);
    out.Set("hostMemory", api.hostMemory());
    out.Set("missing", api.missingOptional());
    return out;
  } catch (const CommError& e) {
    throw makeError(info.Env(), e.code(), e.what());
  }
}

}  // namespace

void defineNccl(Napi::Env env, Napi::Object exports) {
  exports.Set("ncclUniqueId", Napi::Function::New<uniqueId>(env, "ncclUniqueId"));
  exports.Set("ncclProbe", Napi::Function::New<probe>(env, "ncclProbe"));
}

nccl::NcclOptions ncclOptionsOf(Napi::Env env, const Napi::Object& o, int rank, int size) {
  nccl::NcclOptions n;
  n.library = o.Get("library").ToString().Utf8Value();
  n.rank = rank;
  n.size = size;
  n.localRank = o.Has("localRank") ? o.Get("localRank").ToNumber().Int32Value() : 0;
  Napi::Value id = o.Get("id");
  if (!id.IsBuffer() || id.As<Napi::Buffer<char>>().Length() != sizeof n.id.internal) {
    throwInvalid(env, "nccl: id must be a Buffer of " + std::to_string(sizeof n.id.internal) + " bytes");
  }
  std::memcpy(n.id.internal, id.As<Napi::Buffer<char>>().Data(), sizeof n.id.internal);
  return n;
}

}  // namespace spmd::addon
