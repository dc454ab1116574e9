// dlopen/dlsym for the vendor libraries, which are opened at run time so that the addon builds and loads
// without them. Libraries stay loaded for the process's life: vendors keep threads of their own that
// must not lose their code.
#pragma once
#include <string>

namespace spmd::library {

// Throws CommError kUnsupported "<what>: cannot load <path>: <dlerror>".
void* openLibrary(const std::string& path, const char* what);
// Null when absent; throws kUnsupported "<what>: <path> lacks <name>" when `required`.
void* symbol(void* lib, const char* name, bool required, const std::string& path, const char* what);

template <typename Fn>
void resolve(void* lib, const char* name, Fn& out, bool required, const std::string& path, const char* what) {
  out = reinterpret_cast<Fn>(symbol(lib, name, required, path, what));
}

}  // namespace spmd::library
