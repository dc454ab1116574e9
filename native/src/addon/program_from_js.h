// Reads the plain object that src/comm/native.ts builds into a Program, checking every field.
#pragma once
#include <napi.h>

#include "runtime/program.h"

namespace spmd::addon {

Program programFromJs(const Napi::Object& obj, int worldSize);

}  // namespace spmd::addon
