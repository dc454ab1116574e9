#include "base/error.h"

#include <cerrno>
#include <cstring>

namespace spmd {

void throwSystemError(const std::string& what) {
  int e = errno;
  throw CommError(code::kSystem, what + ": " + std::strerror(e));
}

}  // namespace spmd
