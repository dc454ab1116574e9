// Module entry: the Communicator and TcpEndpoint classes, the vendor libraries' module functions, what this
// build contains (with MPI: the MpiBootstrap class and the MPI library's version text; the CUDA kernels it
// embeds), and the names native code accepts and raises (`enums`), which a test holds equal to the TS side's.
#include <napi.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <iterator>
#include <string_view>
#include <vector>

#include "addon/communicator_wrap.h"
#include "addon/library_wrap.h"
#include "addon/tcp_wrap.h"
#include "backends/library/cuda_kernels.h"
#include "backends/shm/crossover.h"
#include "backends/shm/single_copy.h"
#include "base/collectives.h"
#include "base/error.h"
#ifdef SPMD_HAVE_MPI
#include "addon/mpi_wrap.h"
#endif

namespace {

Napi::Array strings(Napi::Env env, const std::vector<std::string_view>& names) {
  Napi::Array a = Napi::Array::New(env, names.size());
  for (size_t i = 0; i < names.size(); ++i) a.Set(uint32_t(i), Napi::String::New(env, names[i].data(), names[i].size()));
  return a;
}

// { dtypes, ops, algorithms, errorCodes }: every name in native code's own tables.
Napi::Object enums(Napi::Env env) {
  const std::vector<std::string_view> codes(std::begin(spmd::code::kAll), std::end(spmd::code::kAll));
  Napi::Object o = Napi::Object::New(env);
  o.Set("dtypes", strings(env, spmd::dtypeNames()));
  o.Set("ops", strings(env, spmd::opKindNames()));
  o.Set("algorithms", strings(env, spmd::algoNames()));
  o.Set("errorCodes", strings(env, codes));
  return o;
}

// endWithParent(signal, parentPid): the kernel sends `signal` to this process when its parent dies
// (PR_SET_PDEATHSIG), whichever launcher that is and whatever the JS thread is doing. False when the parent
// is no longer `parentPid`: it died before the request, which then never fires.
Napi::Value endWithParent(const Napi::CallbackInfo& info) {
  const int signal = info[0].As<Napi::Number>().Int32Value();
  const pid_t parent = info[1].As<Napi::Number>().Int32Value();
#ifdef __linux__
  prctl(PR_SET_PDEATHSIG, signal);  // fails only for a signal number that does not exist
#else
  (void)signal;
#endif
  return Napi::Boolean::New(info.Env(), getppid() == parent);
}

// singleCopyRefusal(): why shm ranks on this host could not move single-copy, "" when they could (runner info).
Napi::Value singleCopyRefusal(const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), spmd::shm::singleCopyRefusal());
}

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
  // What nvcc built at build time: { archs: "sm_80 sm_90 compute_90", bytes }, or null without nvcc.
  size_t fatbinBytes = 0;
  for (const auto& f : spmd::library::builtFatbins()) fatbinBytes += f.size;
  Napi::Value cuda = env.Null();
  if (fatbinBytes) {
    Napi::Object o = Napi::Object::New(env);
    o.Set("archs", spmd::kernels::cuda::kFatbinArchs);
    o.Set("bytes", double(fatbinBytes));
    cuda = o;
  }
  exports.Set("cudaKernels", cuda);
  exports.Set("enums", enums(env));
  exports.Set("endWithParent", Napi::Function::New(env, endWithParent, "endWithParent"));
  exports.Set("singleCopyRefusal", Napi::Function::New(env, singleCopyRefusal, "singleCopyRefusal"));
  exports.Set("singleCopyFromBytes", double(spmd::shm::kSingleCopyFromBytes));
  exports.Set("singleCopyBroadcastFromBytes", double(spmd::shm::kSingleCopyBroadcastFromBytes));
  const auto array = [&env](auto& sizes) {
    Napi::Array out = Napi::Array::New(env);
    for (size_t bytes : sizes) out.Set(out.Length(), double(bytes));
    return out;
  };
  exports.Set("singleCopyTimedBytes", array(spmd::shm::kTimedSizes));
  exports.Set("singleCopyReduceTimedBytes", array(spmd::shm::kReduceTimedSizes));
  return exports;
}

}  // namespace

NODE_API_MODULE(spmd_native, init)
