// NCCL's result codes as CommErrors: code ERR_SPMD_NCCL, and a message naming the call, the result's
// enum name and number, and NCCL's own text for it (ncclGetErrorString, when the library has it).
#pragma once
#include <string>

#include "backends/nccl/nccl_api.h"

namespace spmd::nccl {

const char* resultName(ncclResult_t r);
std::string describe(const Api& api, ncclResult_t r);
// Throws unless `r` is ncclSuccess.
void check(const Api& api, ncclResult_t r, const char* call);

}  // namespace spmd::nccl
