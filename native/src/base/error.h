// Errors raised by native code. The code string travels to JavaScript as err.code (zeromq.js style).
#pragma once
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
// Every code above, for the addon to export.
inline constexpr const char* kAll[] = {kInvalid, kTimeout, kPeerGone, kSystem, kUnsupported, kAborted, kDesync, kNccl, kHccl, kDevice};
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

}  // namespace spmd
