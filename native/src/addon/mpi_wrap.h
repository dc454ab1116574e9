// JS class `MpiBootstrap`: this process's MPI runtime (its thread, MPI_Init_thread, MPI_Finalize) and the
// bootstrap exchanges over it. `new Communicator({ backend: "mpi", mpi })` then runs on the same thread.
#pragma once
#include <napi.h>

#include <memory>

#include "addon/async_ops.h"
#include "backends/mpi/exchange.h"
#include "backends/mpi/runtime.h"

namespace spmd::addon {

class MpiBootstrapWrap : public Napi::ObjectWrap<MpiBootstrapWrap> {
 public:
  static Napi::Function define(Napi::Env env);
  explicit MpiBootstrapWrap(const Napi::CallbackInfo& info);
  ~MpiBootstrapWrap() override;

  // The runtime behind a JS MpiBootstrap; a JS TypeError for any other value.
  static std::shared_ptr<mpi::Runtime> runtimeOf(Napi::Env env, Napi::Value v);

 private:
  Napi::Value init(const Napi::CallbackInfo& info);       // ({ localRanks, funneled }) -> Promise<info>
  Napi::Value allGather(const Napi::CallbackInfo& info);  // (value, timeoutMs) -> Promise<string[]>
  Napi::Value broadcast(const Napi::CallbackInfo& info);  // (value, timeoutMs) -> Promise<rank 0's value>
  Napi::Value barrier(const Napi::CallbackInfo& info);    // (timeoutMs) -> Promise<void>
  Napi::Value finalize(const Napi::CallbackInfo& info);   // (timeoutMs, interrupt?) -> boolean, blocking
  Napi::Value abort(const Napi::CallbackInfo& info);      // (exitCode) -> never returns
  Napi::Value startupStep(const Napi::CallbackInfo& info);  // () -> the MPI call init is in

  // Queues `work(exchange, deadline)` on the MPI thread; its result settles the returned Promise.
  template <typename Work, typename Settle>
  Napi::Value exchange(const Napi::CallbackInfo& info, double timeoutMs, Work work, Settle settle);

  std::shared_ptr<mpi::Runtime> rt_;
  std::shared_ptr<mpi::Exchange> exchange_;  // made and used on the MPI thread, once MPI is up
  AsyncOps ops_;
};

}  // namespace spmd::addon
