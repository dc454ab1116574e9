// Module entry: the Communicator and TcpEndpoint classes and what this build contains (with MPI: the
// MpiBootstrap class and the MPI library's version text).
#include <napi.h>

#include "addon/communicator_wrap.h"
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
