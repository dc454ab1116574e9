// Module entry: the Communicator and TcpEndpoint classes, the vendor libraries' module functions, and what
// this build contains (with MPI: the MpiBootstrap class and the MPI library's version text).
#include <napi.h>

#include "addon/communicator_wrap.h"
#include "addon/library_wrap.h"
#include "addon/tcp_wrap.h"
#ifdef SPMD_HAVE_MPI
#include "addon/mpi_wrap.h"
#endif

namespace {

Napi::Object init(Napi::Env env, Napi::Object exports) {
  exports.Set("Communicator", spmd::addon::CommunicatorWrap::define(env));
  exports.Set("TcpEndpoint", spmd::addon::TcpEndpointWrap::define(env));
  Napi::Array backends = Napi::Array::New(env);
  backends.Set(backends.Length(), Napi::String::New(env, "shm"));
  backends.Set(backends.Length(), Napi::String::New(env, "tcp"));
  // Always built: NCCL and HCCL themselves are opened at run time (libraryProbe says whether they load).
  backends.Set(backends.Length(), Napi::String::New(env, "nccl"));
  backends.Set(backends.Length(), Napi::String::New(env, "hccl"));
  spmd::addon::defineLibraries(env, exports);
#ifdef SPMD_HAVE_MPI
  backends.Set(backends.Length(), Napi::String::New(env, "mpi"));
  exports.Set("MpiBootstrap", spmd::addon::MpiBootstrapWrap::define(env));
  exports.Set("mpiLibrary", spmd::mpi::Runtime::libraryVersion());
#endif
  exports.Set("backends", backends);
  return exports;
}

}  // namespace

NODE_API_MODULE(spmd_native, init)
