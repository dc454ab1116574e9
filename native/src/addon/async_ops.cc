#include "addon/async_ops.h"

#include <future>

#include "addon/errors.h"
#include "base/error.h"

namespace spmd::addon {

void AsyncOps::start(Napi::Env env, const char* name) {
  tsfn_ = Tsfn::New(env, name, 0, 1, this);
  tsfn_.Unref(env);
}

void AsyncOps::stop() { tsfn_.Release(); }

void AsyncOps::settle(Napi::Env env, Napi::Function, AsyncOps* self, Pending* raw) {
  std::unique_ptr<Pending> p(raw);
  if (--self->pending_ == 0) self->tsfn_.Unref(env);
  if (!p->errorCode.empty()) {
    p->deferred.Reject(makeError(env, p->errorCode, p->errorMessage).Value());
    return;
  }
  try {
    p->deferred.Resolve(p->settle(env));
  } catch (const Napi::Error& e) {
    p->deferred.Reject(e.Value());
  }
}

Napi::Value AsyncOps::submit(Napi::Env env, Napi::Object owner, OpQueue& queue, std::unique_ptr<Pending> p) {
  Napi::Promise promise = p->deferred.Promise();
  p->owner = Napi::Persistent(owner);  // released with p, on this thread, once settled
  if (pending_++ == 0) tsfn_.Ref(env);
  Pending* raw = p.release();
  queue.submit([this, raw] {
    running_.store(raw, std::memory_order_release);
    try {
      raw->work();
    } catch (const std::exception& e) {
      raw->errorCode = codeOf(e);
      raw->errorMessage = describe(e);
    }
    Pending* mine = raw;
    // Settled here unless failRunning took it first.
    if (running_.compare_exchange_strong(mine, nullptr, std::memory_order_acq_rel)) tsfn_.BlockingCall(raw);
  });
  return promise;
}

bool AsyncOps::failRunning(const char* code, const std::string& message) {
  Pending* p = running_.exchange(nullptr, std::memory_order_acq_rel);
  if (!p) return false;
  p->errorCode = code;
  p->errorMessage = message;
  tsfn_.BlockingCall(p);
  return true;
}

bool runAndWait(OpQueue& queue, std::function<void()> work, std::chrono::milliseconds limit) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  queue.submit([done, work = std::move(work)] {
    try {
      work();
      done->set_value();
    } catch (...) {
      done->set_exception(std::current_exception());
    }
  });
  if (limit != std::chrono::milliseconds::max() && finished.wait_for(limit) == std::future_status::timeout) return false;
  finished.get();
  return true;
}

}  // namespace spmd::addon
