#include "backends/library/dynlib.h"

#include <dlfcn.h>

#include "base/error.h"

namespace spmd::library {

void* openLibrary(const std::string& path, const char* what) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    throw CommError(code::kUnsupported, std::string(what) + ": cannot load " + path + ": " + (why ? why : "dlopen failed"));
  }
  return lib;
}

void* symbol(void* lib, const char* name, bool required, const std::string& path, const char* what) {
  void* p = dlsym(lib, name);
  if (!p && required) throw CommError(code::kUnsupported, std::string(what) + ": " + path + " lacks " + name + " (not the right library?)");
  return p;
}

}  // namespace spmd::library
