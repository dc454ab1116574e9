// Errors raised by native code. The code string travels to JavaScript as err.code (zeromq.js style).
#pragma once
#include <cstddef>
#include <stdexcept>
#include <string>

namespace spmd {

// Stable codes that JS and tests match on.
namespace code {
inline constexpr const char* kInvalid = "ERR_SPMD_INVALID";        // bad argument from the caller
inline constexpr const char* kTimeout = "ERR_SPMD_TIMEOUT";        // an op passed its deadline
inline constexpr const char* kPeerGone = "ERR_SPMD_PEER_GONE";     // a peer process died or closed
inline constexpr const char* kSystem = "ERR_SPMD_SYSTEM";          // a system call failed
inline constexpr const char* kUnsupported = "ERR_SPMD_UNSUPPORTED";
inline constexpr const char* kAborted = "ERR_SPMD_ABORTED";        // the communicator was aborted
inline constexpr const char* kDesync = "ERR_SPMD_DESYNC";          // a peer's messages do not match ours (out of step)
inline constexpr const char* kNccl = "ERR_SPMD_NCCL";              // NCCL returned or reported an error
inline constexpr const char* kHccl = "ERR_SPMD_HCCL";              // HCCL returned or reported an error
inline constexpr const char* kDevice = "ERR_SPMD_DEVICE";          // the CUDA or Ascend runtime failed
inline constexpr const char* kNoMem = "ERR_SPMD_NOMEM";            // an allocation failed (std::bad_alloc)
// Every code above, for the addon to export.
inline constexpr const char* kAll[] = {kInvalid, kTimeout, kPeerGone, kSystem, kUnsupported, kAborted, kDesync, kNccl, kHccl, kDevice, kNoMem};
}  // namespace code

class CommError : public std::runtime_error {
 public:
  CommError(const char* code, const std::string& message) : std::runtime_error(message), code_(code) {}
  const char* code() const { return code_; }

 private:
  const char* code_;
};

// Throws kSystem with strerror(errno) appended.
[[noreturn]] void throwSystemError(const std::string& what);

// Throws kNoMem: `what` (a stage, a tensor) could not get `bytes`.
[[noreturn]] void throwNoMemory(const std::string& what, size_t bytes);

// The code of a failure: a CommError's own, kNoMem for std::bad_alloc, kSystem for anything else.
const char* codeOf(const std::exception& e);

// The failure in words: e.what(), except "out of memory" for std::bad_alloc (whose what() names a C++ type).
std::string describe(const std::exception& e);

}  // namespace spmd
