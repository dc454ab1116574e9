#include "addon/mpi_wrap.h"

#include "addon/errors.h"
#include "addon/options.h"
#include "base/error.h"

namespace spmd::addon {
namespace {

// Marks JS objects made by this class, so runtimeOf() never unwraps anything else.
constexpr napi_type_tag kMpiBootstrapTag = {0x6d7069626f6f7473ULL, 0x7370206d64726e72ULL};

// Past a failed finalize the MPI thread is idle, so MPI_Abort can run where MPI_THREAD_FUNNELED wants it;
// should that thread not answer, this thread calls it anyway: nothing else is left.
constexpr auto kAbortHandoff = std::chrono::seconds(2);

std::chrono::milliseconds millis(double ms) { return std::chrono::milliseconds(int64_t(ms)); }

double timeoutArg(const Napi::CallbackInfo& info, size_t i, const char* what) {
  if (!info[i].IsNumber() || !(info[i].As<Napi::Number>().DoubleValue() > 0))
    throwInvalid(info.Env(), std::string(what) + ": expected a timeout in milliseconds > 0");
  return info[i].As<Napi::Number>().DoubleValue();
}

}  // namespace

Napi::Function MpiBootstrapWrap::define(Napi::Env env) {
  return DefineClass(env, "MpiBootstrap",
                     {InstanceMethod<&MpiBootstrapWrap::init>("init"),
                      InstanceMethod<&MpiBootstrapWrap::allGather>("allGather"),
                      InstanceMethod<&MpiBootstrapWrap::broadcast>("broadcast"),
                      InstanceMethod<&MpiBootstrapWrap::barrier>("barrier"),
                      InstanceMethod<&MpiBootstrapWrap::finalize>("finalize"),
                      InstanceMethod<&MpiBootstrapWrap::abort>("abort"),
                      InstanceMethod<&MpiBootstrapWrap::startupStep>("startupStep")});
}

MpiBootstrapWrap::MpiBootstrapWrap(const Napi::CallbackInfo& info)
    : Napi::ObjectWrap<MpiBootstrapWrap>(info), rt_(std::make_shared<mpi::Runtime>()) {
  info.This().As<Napi::Object>().TypeTag(&kMpiBootstrapTag);
  ops_.start(info.Env(), "spmd-mpi");
}

MpiBootstrapWrap::~MpiBootstrapWrap() { ops_.stop(); }

std::shared_ptr<mpi::Runtime> MpiBootstrapWrap::runtimeOf(Napi::Env env, Napi::Value v) {
  if (!v.IsObject() || !v.As<Napi::Object>().CheckTypeTag(&kMpiBootstrapTag))
    throwInvalid(env, "mpi: expected the MpiBootstrap the ranks met on");
  return Unwrap(v.As<Napi::Object>())->rt_;
}

Napi::Value MpiBootstrapWrap::init(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  OptionReader o(info[0], "MpiBootstrap.init options.");
  mpi::InitOptions opts;
  opts.localRanks = int(o.integer("localRanks", 1, 1 << 24));
  opts.funneled = o.boolean("funneled");
  mpi::Runtime::prepareEnvironment(opts);
  auto p = std::make_unique<AsyncOps::Pending>(AsyncOps::Pending{Napi::Promise::Deferred::New(env), {}, {}, {}, {}, {}});
  p->work = [rt = rt_, opts, &slot = exchange_] {
    rt->init(opts);
    slot = std::make_shared<mpi::Exchange>(*rt);
  };
  p->settle = [rt = rt_](Napi::Env env) -> Napi::Value {
    Napi::Object out = Napi::Object::New(env);
    out.Set("rank", rt->rank());
    out.Set("size", rt->size());
    out.Set("threadLevel", rt->threadLevel());
    out.Set("lanes", rt->multiple() ? 2 : 1);
    Napi::Object shared = Napi::Object::New(env);
    shared.Set("localRank", rt->sharedRank());
    shared.Set("localSize", rt->sharedSize());
    out.Set("shared", shared);
    return out;
  };
  return ops_.submit(env, Value(), rt_->thread(), std::move(p));
}

template <typename Work, typename Settle>
Napi::Value MpiBootstrapWrap::exchange(const Napi::CallbackInfo& info, double timeoutMs, Work work, Settle settle) {
  Napi::Env env = info.Env();
  auto p = std::make_unique<AsyncOps::Pending>(AsyncOps::Pending{Napi::Promise::Deferred::New(env), {}, {}, {}, {}, {}});
  auto deadline = mpi::Exchange::Clock::now() + millis(timeoutMs);
  p->work = [&slot = exchange_, deadline, work] {
    if (!slot) throw CommError(code::kInvalid, "mpi: the bootstrap is not initialised (or already finalized)");
    work(*slot, deadline);
  };
  p->settle = settle;
  return ops_.submit(env, Value(), rt_->thread(), std::move(p));
}

Napi::Value MpiBootstrapWrap::allGather(const Napi::CallbackInfo& info) {
  auto mine = std::make_shared<std::string>(info[0].ToString().Utf8Value());
  auto all = std::make_shared<std::vector<std::string>>();
  return exchange(
      info, timeoutArg(info, 1, "allGather"),
      [mine, all](mpi::Exchange& x, auto deadline) { *all = x.allGather(*mine, deadline); },
      [all](Napi::Env env) -> Napi::Value {
        Napi::Array out = Napi::Array::New(env, all->size());
        for (uint32_t i = 0; i < all->size(); ++i) out.Set(i, (*all)[i]);
        return out;
      });
}

Napi::Value MpiBootstrapWrap::broadcast(const Napi::CallbackInfo& info) {
  auto value = std::make_shared<std::string>(info[0].IsString() ? info[0].As<Napi::String>().Utf8Value() : "");
  return exchange(
      info, timeoutArg(info, 1, "broadcast"),
      [value](mpi::Exchange& x, auto deadline) { *value = x.broadcast(*value, 0, deadline); },
      [value](Napi::Env env) -> Napi::Value { return Napi::String::New(env, *value); });
}

Napi::Value MpiBootstrapWrap::barrier(const Napi::CallbackInfo& info) {
  return exchange(
      info, timeoutArg(info, 0, "barrier"), [](mpi::Exchange& x, auto deadline) { x.barrier(deadline); },
      [](Napi::Env env) -> Napi::Value { return env.Undefined(); });
}

Napi::Value MpiBootstrapWrap::finalize(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  double timeoutMs = timeoutArg(info, 0, "finalize");
  // An interrupt ends whatever op the MPI thread is waiting in, so finalize need not wait for its deadline.
  if (info[1].IsString()) rt_->interrupt(info[1].As<Napi::String>().Utf8Value());
  // A lane stuck inside MPI for good holds the MPI thread: finalizing is impossible, the exit aborts.
  if (rt_->wedged()) return Napi::Boolean::New(env, false);
  auto finalized = std::make_shared<bool>(false);
  bool ran = false;
  try {
    ran = runAndWait(
        rt_->thread(),
        [rt = rt_, finalized, &slot = exchange_] {
          slot.reset();
          *finalized = rt->finalize();
        },
        millis(timeoutMs));
  } catch (const CommError& e) {
    throw makeError(env, e.code(), e.what());
  }
  // MPI_Finalize waits for every rank; one that never arrives leaves nothing but the last resort.
  if (!ran) mpi::Runtime::abortJob(1);
  return Napi::Boolean::New(env, *finalized);
}

Napi::Value MpiBootstrapWrap::abort(const Napi::CallbackInfo& info) {
  int exitCode = info[0].IsNumber() ? info[0].As<Napi::Number>().Int32Value() : 1;
  runAndWait(rt_->thread(), [exitCode] { mpi::Runtime::abortJob(exitCode); }, kAbortHandoff);
  mpi::Runtime::abortJob(exitCode);
}

Napi::Value MpiBootstrapWrap::startupStep(const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), rt_->startupStep());
}

}  // namespace spmd::addon
