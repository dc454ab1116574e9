// JS class `Communicator`: owns a started backend and its progress thread. Every method that communicates
// returns a Promise; the op runs on the progress thread and settles back on the JS thread.
#pragma once
#include <napi.h>

#include <memory>
#include <string>
#include <vector>

#include "addon/async_ops.h"
#include "runtime/backend.h"
#include "base/op_queue.h"
#include "backends/tcp/tcp_backend.h"
#include "runtime/program.h"

namespace spmd::addon {

class CommunicatorWrap : public Napi::ObjectWrap<CommunicatorWrap> {
 public:
  static Napi::Function define(Napi::Env env);
  explicit CommunicatorWrap(const Napi::CallbackInfo& info);
  ~CommunicatorWrap() override;

 private:
  // Finished on the progress thread, settled on the JS thread.
  using Pending = AsyncOps::Pending;

  Napi::Value submit(Napi::Env env, std::unique_ptr<Pending> p);
  void requireOpen(Napi::Env env) const;
  void shutdown();

  Napi::Value run(const Napi::CallbackInfo& info);
  Napi::Value allreduceF64(const Napi::CallbackInfo& info);
  Napi::Value output(const Napi::CallbackInfo& info);
  Napi::Value tensor(const Napi::CallbackInfo& info);
  Napi::Value state(const Napi::CallbackInfo& info);
  Napi::Value flightRecord(const Napi::CallbackInfo& info);
  Napi::Value release(const Napi::CallbackInfo& info);
  // Resolves once the backend joined the other ranks (Backend::connect), on the progress thread. The tcp
  // backend takes (peers): where to reach each rank, known only once the ranks have met.
  Napi::Value connect(const Napi::CallbackInfo& info);
  Napi::Value close(const Napi::CallbackInfo& info);
  Napi::Value getRank(const Napi::CallbackInfo& info);
  Napi::Value getSize(const Napi::CallbackInfo& info);
  Napi::Value getBackend(const Napi::CallbackInfo& info);
  Napi::Value getCopyPath(const Napi::CallbackInfo& info);
  Napi::Value getCoreRoundTrips(const Napi::CallbackInfo& info);
  Napi::Value getStepsDone(const Napi::CallbackInfo& info);

  int rank_ = 0, size_ = 1;
  std::unique_ptr<Backend> backend_;
  tcp::TcpBackend* tcp_ = nullptr;  // backend_ when it is the tcp backend, whose connect() takes peers
  // The progress thread: the communicator's own (shm), or the MPI runtime's thread, which MPI calls
  // must stay on (mpi; this also keeps the runtime alive). shutdown() ends the backend on it first.
  std::shared_ptr<OpQueue> queue_;
  AsyncOps ops_;
  std::vector<HostBytes> outputs_;  // of the last run, for output(i)
  std::vector<DType> outputTypes_;
  std::vector<HostBytes> tensors_;  // the last run's inputs, for tensor(i)
  std::vector<DType> tensorTypes_;
  std::vector<std::vector<NamedBuffer>> states_;  // the last run's op state, for state(i)
  // Steps the running program has finished; shared with the op, which may outlive a closed wrapper.
  std::shared_ptr<std::atomic<int64_t>> stepsDone_ = std::make_shared<std::atomic<int64_t>>(0);
};

}  // namespace spmd::addon
