#include "base/error.h"

#include <cerrno>
#include <cstring>
#include <new>

namespace spmd {

void throwSystemError(const std::string& what) {
  int e = errno;
  throw CommError(code::kSystem, what + ": " + std::strerror(e));
}

void throwNoMemory(const std::string& what, size_t bytes) {
  throw CommError(code::kNoMem, what + ": cannot allocate " + std::to_string(bytes) + " bytes (out of memory)");
}

const char* codeOf(const std::exception& e) {
  if (const auto* ce = dynamic_cast<const CommError*>(&e)) return ce->code();
  return dynamic_cast<const std::bad_alloc*>(&e) ? code::kNoMem : code::kSystem;
}

std::string describe(const std::exception& e) {
  return dynamic_cast<const std::bad_alloc*>(&e) ? "out of memory" : e.what();
}

}  // namespace spmd
