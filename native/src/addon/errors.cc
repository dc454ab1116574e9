#include "addon/errors.h"

#include "base/error.h"

namespace spmd::addon {

Napi::Error makeError(Napi::Env env, const std::string& code, const std::string& message) {
  Napi::Error err = Napi::Error::New(env, message);
  err.Set("code", Napi::String::New(env, code));
  return err;
}

void throwInvalid(Napi::Env env, const std::string& message) {
  Napi::Error err = Napi::TypeError::New(env, message);
  err.Set("code", Napi::String::New(env, code::kInvalid));
  throw err;
}

}  // namespace spmd::addon
