// Native errors become JS Errors carrying a stable `code` (zeromq.js style) so callers can branch on it.
#pragma once
#include <napi.h>

#include <string>

namespace spmd::addon {

Napi::Error makeError(Napi::Env env, const std::string& code, const std::string& message);
[[noreturn]] void throwInvalid(Napi::Env env, const std::string& message);

}  // namespace spmd::addon
