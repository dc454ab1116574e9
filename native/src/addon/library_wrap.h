// The vendor library backends' module functions (the libraries are opened at run time, so these exist in
// every build): libraryId(backend, path) for rank 0 to broadcast (NCCL's unique id, HCCL's root info),
// libraryProbe(backend, path) for `runner info`, deviceMemory(backend, path, index) for the memory plan, and
// the backend a Communicator starts for them.
#pragma once
#include <napi.h>

#include <memory>

#include "addon/options.h"
#include "runtime/backend.h"

namespace spmd::addon {

void defineLibraries(Napi::Env env, Napi::Object exports);
bool isLibraryBackend(const std::string& kind);
// From the Communicator's options {backend, library, id, localRank}; loads the library, joins on connect().
std::unique_ptr<Backend> startLibraryBackend(const std::string& kind, const OptionReader& o, int rank, int size);

}  // namespace spmd::addon
