// dlopen/dlsym for the vendor libraries, which are opened at run time so that the addon builds and loads
// without them. Libraries stay loaded for the process's life: vendors keep threads of their own that
// must not lose their code.
#pragma once
#include <map>
#include <memory>
#include <mutex>
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

// `open(path)` once per path and process (a vendor's Api type caches its own); later calls return it.
// A failed open is not cached, so a corrected environment can retry.
template <typename Api>
const Api& loadOnce(const std::string& path, Api (*open)(const std::string&)) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Api>> loaded;
  std::lock_guard lock(mu);
  auto& slot = loaded[path];
  if (!slot) slot = std::make_unique<Api>(open(path));
  return *slot;
}

// Appends `name` to the comma-separated `missing` when the symbol is absent.
inline void noteMissing(std::string& missing, bool present, const char* name) {
  if (!present) missing += (missing.empty() ? "" : ", ") + std::string(name);
}

}  // namespace spmd::library
