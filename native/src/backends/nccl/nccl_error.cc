#include "backends/nccl/nccl_error.h"

#include "base/error.h"

namespace spmd::nccl {

const char* resultName(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
  }
  return "unknown ncclResult_t";  // a newer NCCL's code: the number still says which
}

std::string describe(const Api& api, ncclResult_t r) {
  std::string s = std::string(resultName(r)) + " (" + std::to_string(int(r)) + ")";
  if (api.getErrorString) {
    if (const char* text = api.getErrorString(r)) s += ": " + std::string(text);
  }
  return s;
}

void check(const Api& api, ncclResult_t r, const char* call) {
  if (r != ncclSuccess) throw CommError(code::kNccl, std::string("NCCL ") + call + " failed: " + describe(api, r));
}

}  // namespace spmd::nccl
