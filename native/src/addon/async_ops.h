// Work for a progress thread whose outcome settles a JS Promise on the JS thread: the value `settle`
// builds, or an Error carrying the CommError's code. Shared by every JS class that owns such a thread.
#pragma once
#include <napi.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "base/op_queue.h"

namespace spmd::addon {

class AsyncOps {
 public:
  struct Pending {
    Napi::Promise::Deferred deferred;
    std::function<void()> work;                    // progress thread
    std::function<Napi::Value(Napi::Env)> settle;  // JS thread, after work succeeded
    std::string errorCode, errorMessage;
    // The JS object whose native state `work` and `settle` use, pinned until settle ran: JS may drop its
    // last reference while the op is in flight, and the collector must not free the state under it.
    Napi::ObjectReference owner;
  };

  void start(Napi::Env env, const char* name);
  // Queues p->work on `queue`; the returned Promise settles once it ran. `owner` (the JS object that owns
  // this AsyncOps) stays alive until then.
  Napi::Value submit(Napi::Env env, Napi::Object owner, OpQueue& queue, std::unique_ptr<Pending> p);
  void stop();
  // Some submitted work has not settled yet (JS thread).
  bool busy() const { return pending_ > 0; }
  // Any thread: settles the work running now with the error (code, message), as if it had thrown it; the
  // work may run on, but what it does later settles nothing. For work that will never return (a rank
  // stuck inside MPI, which the watchdog gave up on). False when no work is running.
  bool failRunning(const char* code, const std::string& message);

 private:
  static void settle(Napi::Env env, Napi::Function, AsyncOps* self, Pending* p);
  using Tsfn = Napi::TypedThreadSafeFunction<AsyncOps, Pending, &AsyncOps::settle>;

  Tsfn tsfn_;
  int pending_ = 0;  // only pending work keeps the process alive
  std::atomic<Pending*> running_{nullptr};  // the work on the progress thread now; whoever takes it settles it
};

// Runs `work` on `queue` after what is queued there and blocks until it ran, rethrowing what it threw.
// Returns false if `limit` passed first (the work then still runs later, so it must own what it uses).
bool runAndWait(OpQueue& queue, std::function<void()> work,
                std::chrono::milliseconds limit = std::chrono::milliseconds::max());

}  // namespace spmd::addon
