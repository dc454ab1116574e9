#include "addon/communicator_wrap.h"

#include "addon/errors.h"
#include "addon/program_from_js.h"
#include "backends/shm/shm_backend.h"
#include "core/error.h"
#include "core/executor.h"

namespace spmd::addon {
namespace {

Napi::Float64Array toFloat64Array(Napi::Env env, const std::vector<double>& v) {
  auto a = Napi::Float64Array::New(env, v.size());
  std::copy(v.begin(), v.end(), a.Data());
  return a;
}

std::unique_ptr<Backend> startBackend(Napi::Env env, const Napi::Object& o, int rank, int size) {
  std::string kind = o.Get("backend").ToString().Utf8Value();
  if (kind == "shm") {
    shm::ShmOptions so;
    so.name = o.Get("name").ToString().Utf8Value();
    so.rank = rank;
    so.size = size;
    so.create = o.Get("create").ToBoolean().Value();
    if (o.Has("channelBytes")) so.channelBytes = size_t(o.Get("channelBytes").ToNumber().Int64Value());
    if (so.name.size() < 2 || so.name[0] != '/') throwInvalid(env, "shm: name must start with '/'");
    return std::make_unique<shm::ShmBackend>(so);
  }
  Napi::Error err = makeError(env, code::kUnsupported, "backend \"" + kind + "\" is not built into this addon");
  throw err;
}

}  // namespace

Napi::Function CommunicatorWrap::define(Napi::Env env) {
  return DefineClass(env, "Communicator",
                     {InstanceMethod<&CommunicatorWrap::run>("run"),
                      InstanceMethod<&CommunicatorWrap::allreduceF64>("allreduceF64"),
                      InstanceMethod<&CommunicatorWrap::output>("output"),
                      InstanceMethod<&CommunicatorWrap::tensor>("tensor"),
                      InstanceMethod<&CommunicatorWrap::release>("release"),
                      InstanceMethod<&CommunicatorWrap::close>("close"),
                      InstanceAccessor<&CommunicatorWrap::getRank>("rank"),
                      InstanceAccessor<&CommunicatorWrap::getSize>("size"),
                      InstanceAccessor<&CommunicatorWrap::getBackend>("backend")});
}

CommunicatorWrap::CommunicatorWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<CommunicatorWrap>(info) {
  Napi::Env env = info.Env();
  if (!info[0].IsObject()) throwInvalid(env, "Communicator: expected an options object");
  Napi::Object o = info[0].As<Napi::Object>();
  rank_ = o.Get("rank").ToNumber().Int32Value();
  size_ = o.Get("size").ToNumber().Int32Value();
  if (size_ < 1 || rank_ < 0 || rank_ >= size_) throwInvalid(env, "Communicator: need 0 <= rank < size");
  try {
    backend_ = startBackend(env, o, rank_, size_);
  } catch (const CommError& e) {
    throw makeError(env, e.code(), e.what());
  }
  queue_ = std::make_unique<OpQueue>();
  tsfn_ = Tsfn::New(env, "spmd-communicator", 0, 1, this);
  tsfn_.Unref(env);  // only pending ops keep the process alive
}

CommunicatorWrap::~CommunicatorWrap() { shutdown(); }

void CommunicatorWrap::shutdown() {
  if (!queue_) return;
  queue_.reset();  // joins the progress thread after the queued ops
  if (backend_) backend_->release();
  backend_.reset();
  tsfn_.Release();
}

void CommunicatorWrap::requireOpen(Napi::Env env) const {
  if (!queue_) throw makeError(env, code::kInvalid, "communicator is closed");
}

void CommunicatorWrap::settle(Napi::Env env, Napi::Function, CommunicatorWrap* self, Pending* raw) {
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

Napi::Value CommunicatorWrap::submit(Napi::Env env, std::unique_ptr<Pending> p) {
  Napi::Promise promise = p->deferred.Promise();
  if (pending_++ == 0) tsfn_.Ref(env);
  Pending* raw = p.release();
  queue_->submit([this, raw] {
    try {
      raw->work();
    } catch (const CommError& e) {
      raw->errorCode = e.code();
      raw->errorMessage = e.what();
    } catch (const std::exception& e) {
      raw->errorCode = code::kSystem;
      raw->errorMessage = e.what();
    }
    tsfn_.BlockingCall(raw);
  });
  return promise;
}

Napi::Value CommunicatorWrap::run(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  requireOpen(env);
  if (!info[0].IsObject()) throwInvalid(env, "run: expected a program object");
  auto program = std::make_shared<Program>(programFromJs(info[0].As<Napi::Object>(), size_));
  auto results = std::make_shared<std::vector<OpResult>>();
  auto tensors = std::make_shared<std::vector<std::vector<uint8_t>>>();
  auto p = std::make_unique<Pending>(Pending{Napi::Promise::Deferred::New(env), {}, {}, {}, {}});
  Backend* backend = backend_.get();
  p->work = [backend, program, results, tensors] {
    Collectives* lane1 = backend->lanes() > 1 ? &backend->lane(1) : nullptr;
    Executor ex(backend->lane(0), lane1, *program);
    *results = ex.run();
    *tensors = ex.takeTensors();
  };
  p->settle = [this, program, results, tensors](Napi::Env env) -> Napi::Value {
    tensors_ = std::move(*tensors);
    tensorTypes_.clear();
    for (const TensorSpec& t : program->tensors) tensorTypes_.push_back(t.dtype);
    Napi::Array out = Napi::Array::New(env, results->size());
    outputs_.clear();
    outputTypes_.clear();
    for (size_t i = 0; i < results->size(); ++i) {
      OpResult& r = (*results)[i];
      Napi::Object o = Napi::Object::New(env);
      o.Set("algorithm", std::string(algoName(r.algorithm)));
      o.Set("timeUs", toFloat64Array(env, r.timeUs));
      o.Set("overallUs", toFloat64Array(env, r.overallUs));
      o.Set("concurrentUs", toFloat64Array(env, r.concurrentUs));
      o.Set("wrong", double(r.wrong));
      o.Set("checked", double(r.checked));
      out.Set(uint32_t(i), o);
      outputs_.push_back(std::move(r.output));
      outputTypes_.push_back(r.outType);
    }
    return out;
  };
  return submit(env, std::move(p));
}

Napi::Value CommunicatorWrap::allreduceF64(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  requireOpen(env);
  if (!info[0].IsTypedArray() || info[0].As<Napi::TypedArray>().TypedArrayType() != napi_float64_array)
    throwInvalid(env, "allreduceF64: expected a Float64Array");
  std::string opName = info[1].IsString() ? info[1].As<Napi::String>().Utf8Value() : "sum";
  RedOp op = opName == "max" ? RedOp::Max : opName == "min" ? RedOp::Min : RedOp::Sum;
  if (opName != "sum" && opName != "max" && opName != "min") throwInvalid(env, "allreduceF64: op must be sum, max or min");
  auto arr = info[0].As<Napi::Float64Array>();
  auto data = std::make_shared<std::vector<double>>(arr.Data(), arr.Data() + arr.ElementLength());
  auto p = std::make_unique<Pending>(Pending{Napi::Promise::Deferred::New(env), {}, {}, {}, {}});
  Backend* backend = backend_.get();
  p->work = [backend, data, op] {
    Collectives& c = backend->lane(0);
    c.setDeadline(Transport::Clock::now() + std::chrono::seconds(300));
    c.allreduce(data->data(), data->data(), data->size(), DType::F64, op, Algo::Auto);
  };
  p->settle = [data](Napi::Env env) -> Napi::Value { return toFloat64Array(env, *data); };
  return submit(env, std::move(p));
}

namespace {

Napi::Value typedBytes(const Napi::CallbackInfo& info, const char* what, const std::vector<std::vector<uint8_t>>& all,
                       const std::vector<DType>& types) {
  Napi::Env env = info.Env();
  uint32_t i = info[0].ToNumber().Uint32Value();
  if (i >= all.size()) throwInvalid(env, std::string(what) + ": no index " + std::to_string(i) + " in the last run");
  Napi::Object o = Napi::Object::New(env);
  o.Set("dtype", std::string(dtypeName(types[i])));
  o.Set("data", Napi::Buffer<uint8_t>::Copy(env, all[i].data(), all[i].size()));
  return o;
}

}  // namespace

Napi::Value CommunicatorWrap::output(const Napi::CallbackInfo& info) { return typedBytes(info, "output", outputs_, outputTypes_); }
Napi::Value CommunicatorWrap::tensor(const Napi::CallbackInfo& info) { return typedBytes(info, "tensor", tensors_, tensorTypes_); }

Napi::Value CommunicatorWrap::release(const Napi::CallbackInfo& info) {
  if (backend_) backend_->release();
  return info.Env().Undefined();
}

Napi::Value CommunicatorWrap::close(const Napi::CallbackInfo& info) {
  shutdown();
  return info.Env().Undefined();
}

Napi::Value CommunicatorWrap::getRank(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), rank_); }
Napi::Value CommunicatorWrap::getSize(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), size_); }
Napi::Value CommunicatorWrap::getBackend(const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), backend_ ? backend_->name() : "closed");
}

}  // namespace spmd::addon
