// NCCL's module functions (the library is opened at run time, so these exist in every build):
// ncclUniqueId(library) for rank 0 to broadcast, ncclProbe(library) for `runner info`, and the options
// that start the nccl backend.
#pragma once
#include <napi.h>

#include "backends/nccl/nccl_api.h"
#include "backends/nccl/nccl_backend.h"

namespace spmd::addon {

void defineNccl(Napi::Env env, Napi::Object exports);
nccl::NcclOptions ncclOptionsOf(Napi::Env env, const Napi::Object& o, int rank, int size);

}  // namespace spmd::addon
