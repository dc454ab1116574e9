// Module entry: the Communicator class and what this build contains.
#include <napi.h>

#include "addon/communicator_wrap.h"

namespace {

Napi::Object init(Napi::Env env, Napi::Object exports) {
  exports.Set("Communicator", spmd::addon::CommunicatorWrap::define(env));
  Napi::Array backends = Napi::Array::New(env);
  backends.Set(0u, Napi::String::New(env, "shm"));
  exports.Set("backends", backends);
  return exports;
}

}  // namespace

NODE_API_MODULE(spmd_native, init)
