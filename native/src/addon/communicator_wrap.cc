#include "addon/communicator_wrap.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "addon/errors.h"
#include "addon/library_wrap.h"
#include "addon/options.h"
#include "addon/program_from_js.h"
#include "addon/tcp_wrap.h"
#include "backends/shm/shm_backend.h"
#include "backends/tcp/tcp_backend.h"
#include "base/error.h"
#include "runtime/executor.h"
#include "runtime/flight_recorder.h"
#ifdef SPMD_HAVE_MPI
#include "addon/mpi_wrap.h"
#include "backends/mpi/mpi_backend.h"
#endif

namespace spmd::addon {
namespace {

Napi::Float64Array toFloat64Array(Napi::Env env, const std::vector<double>& v) {
  auto a = Napi::Float64Array::New(env, v.size());
  std::copy(v.begin(), v.end(), a.Data());
  return a;
}

// 32 bytes given as 64 hex digits: the tcp transport's key, a shm segment's tag. `what` names it in errors.
std::array<uint8_t, 32> parseHex32(Napi::Env env, Napi::Value v, const std::string& what) {
  std::string hex = v.IsString() ? v.As<Napi::String>().Utf8Value() : "";
  std::array<uint8_t, 32> key{};
  if (hex.size() != 2 * key.size()) throwInvalid(env, what + " must be 64 hex digits");
  for (size_t i = 0; i < key.size(); ++i) {
    size_t used = 0;
    int byte = -1;
    try {
      byte = std::stoi(hex.substr(2 * i, 2), &used, 16);
    } catch (const std::exception&) {
    }
    if (used != 2 || byte < 0) throwInvalid(env, what + " must be 64 hex digits");
    key[i] = uint8_t(byte);
  }
  return key;
}

// The tcp handshake's HMAC-SHA-256: OpenSSL's libcrypto (linked here, in the addon, so that the backends'
// floor and its C++ tests need no crypto library).
tcp::Mac hmacSha256(const tcp::Key& key, const uint8_t* bytes, size_t n) {
  tcp::Mac out{};
  unsigned len = 0;
  if (!HMAC(EVP_sha256(), key.data(), int(key.size()), bytes, n, out.data(), &len) || len != out.size()) {
    throw CommError(code::kSystem, "tcp: HMAC-SHA-256 failed");
  }
  return out;
}

std::unique_ptr<tcp::TcpBackend> startTcp(const OptionReader& o, int rank, int size) {
  Napi::Env env = o.env();
  tcp::TcpOptions to;
  to.rank = rank;
  to.size = size;
  to.key = parseHex32(env, o.value("key"), "tcp: key");
  to.mac = hmacSha256;
  to.listener = TcpEndpointWrap::takeListener(env, o.value("endpoint"));
  to.nodeOf = o.indices("nodeOf", size_t(size));
  if (to.nodeOf.size() != size_t(size)) o.fail("nodeOf", "one node index per rank (" + std::to_string(size) + ")");
  if (o.has("local")) {
    OptionReader l = o.object("local");
    tcp::LocalGroup group;
    group.name = l.string("name");
    group.tag = parseHex32(env, l.value("tag"), "tcp: local.tag");
    if (group.name.size() < 2 || group.name[0] != '/') l.fail("name", "a name that starts with '/'");
    if (l.has("channelBytes")) group.channelBytes = size_t(l.integer("channelBytes", 1, int64_t(1) << 40));
    if (l.has("singleCopy")) group.singleCopy = l.boolean("singleCopy");
    if (l.has("sharesCores")) group.sharesCores = l.boolean("sharesCores");
    to.local = std::move(group);
  }
  return std::make_unique<tcp::TcpBackend>(std::move(to));
}

// Starts the backend `o` names and sets `queue` to the progress thread its ops must run on.
std::unique_ptr<Backend> startBackend(const OptionReader& o, int rank, int size, std::shared_ptr<OpQueue>& queue,
                                      tcp::TcpBackend*& tcpBackend) {
  Napi::Env env = o.env();
  std::string kind = o.string("backend");
#ifdef SPMD_HAVE_MPI
  if (kind == "mpi") {
    std::shared_ptr<mpi::Runtime> rt = MpiBootstrapWrap::runtimeOf(env, o.value("mpi"));
    queue = std::shared_ptr<OpQueue>(rt, &rt->thread());
    std::unique_ptr<Backend> backend;
    // MPI calls stay on the MPI thread; the communicators it creates take every rank a moment at most.
    runAndWait(*queue, [&] {
      if (rt->rank() != rank || rt->size() != size) {
        throw CommError(code::kInvalid, "mpi: MPI says rank " + std::to_string(rt->rank()) + " of " + std::to_string(rt->size()) +
                                            ", the communicator was asked for rank " + std::to_string(rank) + " of " +
                                            std::to_string(size));
      }
      backend = std::make_unique<mpi::MpiBackend>(*rt);
    });
    return backend;
  }
#endif
  if (isLibraryBackend(kind)) {
    queue = std::make_shared<OpQueue>();
    return startLibraryBackend(kind, o, rank, size);
  }
  if (kind == "shm") {
    queue = std::make_shared<OpQueue>();
    shm::ShmOptions so;
    so.name = o.string("name");
    so.tag = parseHex32(env, o.value("tag"), "shm: tag");
    so.rank = rank;
    so.size = size;
    so.create = o.boolean("create");
    if (o.has("channelBytes")) so.channelBytes = size_t(o.integer("channelBytes", 1, int64_t(1) << 40));
    if (o.has("sharesCores")) so.sharesCores = o.boolean("sharesCores");
    if (o.has("singleCopy")) so.singleCopy = o.boolean("singleCopy");
    if (o.has("timedCopyPath")) so.timedCopyPath = o.boolean("timedCopyPath");
    if (so.name.size() < 2 || so.name[0] != '/') o.fail("name", "a name that starts with '/'");
    return std::make_unique<shm::ShmBackend>(so);
  }
  if (kind == "tcp") {
    queue = std::make_shared<OpQueue>();
    auto backend = startTcp(o, rank, size);
    tcpBackend = backend.get();
    return backend;
  }
  Napi::Error err = makeError(env, code::kUnsupported, "backend \"" + kind + "\" is not built into this addon");
  throw err;
}

// tcp's connect(peers): where each rank listens ({ host, port }), null for ranks it reaches
// otherwise. Parsed here, on the JS thread, so a bad address is a TypeError at the call.
std::vector<std::optional<tcp::SocketAddress>> tcpPeers(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsArray()) throwInvalid(env, "connect: the tcp backend expects (peers)");
  Napi::Array list = info[0].As<Napi::Array>();
  std::vector<std::optional<tcp::SocketAddress>> peers(list.Length());
  try {
    for (uint32_t i = 0; i < list.Length(); ++i) {
      Napi::Value p = list.Get(i);
      if (p.IsNull() || p.IsUndefined()) continue;
      if (!p.IsObject()) throwInvalid(env, "connect: each peer is { host, port } or null");
      Napi::Object a = p.As<Napi::Object>();
      peers[i] = tcp::SocketAddress::parse(a.Get("host").ToString().Utf8Value(), uint16_t(a.Get("port").ToNumber().Uint32Value()));
    }
  } catch (const CommError& e) {
    throw makeError(env, e.code(), e.what());
  }
  return peers;
}

}  // namespace

Napi::Function CommunicatorWrap::define(Napi::Env env) {
  return DefineClass(env, "Communicator",
                     {InstanceMethod<&CommunicatorWrap::run>("run"),
                      InstanceMethod<&CommunicatorWrap::allreduceF64>("allreduceF64"),
                      InstanceMethod<&CommunicatorWrap::output>("output"),
                      InstanceMethod<&CommunicatorWrap::tensor>("tensor"),
                      InstanceMethod<&CommunicatorWrap::state>("state"),
                      InstanceMethod<&CommunicatorWrap::flightRecord>("flightRecord"),
                      InstanceMethod<&CommunicatorWrap::release>("release"),
                      InstanceMethod<&CommunicatorWrap::connect>("connect"),
                      InstanceMethod<&CommunicatorWrap::close>("close"),
                      InstanceAccessor<&CommunicatorWrap::getRank>("rank"),
                      InstanceAccessor<&CommunicatorWrap::getSize>("size"),
                      InstanceAccessor<&CommunicatorWrap::getBackend>("backend"),
                      InstanceAccessor<&CommunicatorWrap::getCopyPath>("copyPath"),
                      InstanceAccessor<&CommunicatorWrap::getCoreRoundTrips>("coreRoundTrips"),
                      InstanceAccessor<&CommunicatorWrap::getStepsDone>("stepsDone")});
}

CommunicatorWrap::CommunicatorWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<CommunicatorWrap>(info) {
  Napi::Env env = info.Env();
  OptionReader options(info[0], "Communicator options.");
  size_ = int(options.integer("size", 1, 1 << 24));
  rank_ = int(options.integer("rank", 0, size_ - 1));
  try {
    backend_ = startBackend(options, rank_, size_, queue_, tcp_);
  } catch (const CommError& e) {
    throw makeError(env, e.code(), e.what());
  }
  ops_.start(env, "spmd-communicator");
  backend_->onFatal([this](const char* code, const std::string& message) { ops_.failRunning(code, message); });
}

CommunicatorWrap::~CommunicatorWrap() { shutdown(); }

void CommunicatorWrap::shutdown() {
  if (!queue_) return;
  if (backend_->wedged()) {
    // An op is stuck inside the library for good, on the thread the teardown would run on, using the
    // backend: both are left to the process's end, which ends the job.
    backend_->release();
    static_cast<void>(backend_.release());
    queue_.reset();
    ops_.stop();
    return;
  }
  // After the queued ops, on their thread: an MPI backend frees its communicators where it made them.
  runAndWait(*queue_, [this] {
    backend_->release();
    backend_.reset();
  });
  queue_.reset();  // joins the progress thread if it was this communicator's own
  ops_.stop();
}

void CommunicatorWrap::requireOpen(Napi::Env env) const {
  if (!queue_) throw makeError(env, code::kInvalid, "communicator is closed");
}

Napi::Value CommunicatorWrap::submit(Napi::Env env, std::unique_ptr<Pending> p) {
  return ops_.submit(env, Value(), *queue_, std::move(p));
}

Napi::Value CommunicatorWrap::run(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  requireOpen(env);
  if (!info[0].IsObject()) throwInvalid(env, "run: expected a program object");
  auto program = std::make_shared<Program>(programFromJs(info[0].As<Napi::Object>(), size_));
  auto results = std::make_shared<std::vector<OpResult>>();
  auto tensors = std::make_shared<std::vector<HostBytes>>();
  auto p = std::make_unique<Pending>(Pending{Napi::Promise::Deferred::New(env), {}, {}, {}, {}, {}});
  Backend* backend = backend_.get();
  auto steps = stepsDone_;
  p->work = [backend, program, results, tensors, steps] {
    Executor ex(*backend, *program);
    steps->store(0);
    ex.publishProgress(steps.get());
    *results = ex.run();
    *tensors = ex.takeTensors();
  };
  p->settle = [this, program, results, tensors](Napi::Env env) -> Napi::Value {
    tensors_ = std::move(*tensors);
    tensorTypes_.clear();
    for (const TensorSpec& t : program->tensors) tensorTypes_.push_back(t.dtype);
    Napi::Array out = Napi::Array::New(env, results->size());
    outputs_.clear();
    states_.clear();
    outputTypes_.clear();
    for (size_t i = 0; i < results->size(); ++i) {
      OpResult& r = (*results)[i];
      Napi::Object o = Napi::Object::New(env);
      o.Set("algorithm", std::string(algoName(r.algorithm)));
      o.Set("timeUs", toFloat64Array(env, r.timeUs));
      o.Set("startUs", toFloat64Array(env, r.startUs));
      o.Set("overallUs", toFloat64Array(env, r.overallUs));
      o.Set("concurrentUs", toFloat64Array(env, r.concurrentUs));
      o.Set("wrong", double(r.wrong));
      o.Set("checked", double(r.checked));
      Napi::Array mismatches = Napi::Array::New(env, r.mismatches.size());
      for (size_t m = 0; m < r.mismatches.size(); ++m) {
        const Mismatch& w = r.mismatches[m];
        Napi::Object x = Napi::Object::New(env);
        x.Set("index", double(w.index));
        x.Set("tensor", w.tensor);
        x.Set("sourceIndex", double(w.sourceIndex));
        x.Set("from", w.from);
        x.Set("expected", w.expected);
        x.Set("found", w.found);
        mismatches.Set(uint32_t(m), x);
      }
      o.Set("mismatches", mismatches);
      if (r.links.split) {
        Napi::Object links = Napi::Object::New(env);
        links.Set("shmBytes", double(r.links.shmBytes));
        links.Set("tcpBytes", double(r.links.tcpBytes));
        links.Set("shmUs", r.links.shmUs);
        links.Set("tcpUs", r.links.tcpUs);
        o.Set("links", links);
      }
      for (const auto& [name, values] : r.series) o.Set(name, toFloat64Array(env, values));
      out.Set(uint32_t(i), o);
      outputs_.push_back(std::move(r.output));
      states_.push_back(std::move(r.state));
      outputTypes_.push_back(r.outType);
    }
    return out;
  };
  return submit(env, std::move(p));
}

// (data: Float64Array, op, timeoutSec, label) -> Promise<Float64Array>: the small exchanges of reporting,
// numbered and recorded like the job's ops (every rank makes the same ones, in the same order).
Napi::Value CommunicatorWrap::allreduceF64(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  requireOpen(env);
  if (!info[0].IsTypedArray() || info[0].As<Napi::TypedArray>().TypedArrayType() != napi_float64_array)
    throwInvalid(env, "allreduceF64: expected a Float64Array");
  std::string opName = info[1].IsString() ? info[1].As<Napi::String>().Utf8Value() : "sum";
  RedOp op = opName == "max" ? RedOp::Max : opName == "min" ? RedOp::Min : RedOp::Sum;
  if (opName != "sum" && opName != "max" && opName != "min") throwInvalid(env, "allreduceF64: op must be sum, max or min");
  const double timeoutSec = info[2].IsNumber() ? info[2].As<Napi::Number>().DoubleValue() : 0;
  if (!(timeoutSec > 0)) throwInvalid(env, "allreduceF64: expected a timeout in seconds > 0");
  std::string label = info[3].IsString() ? info[3].As<Napi::String>().Utf8Value() : "(report)";
  auto arr = info[0].As<Napi::Float64Array>();
  auto data = std::make_shared<std::vector<double>>(arr.Data(), arr.Data() + arr.ElementLength());
  auto p = std::make_unique<Pending>(Pending{Napi::Promise::Deferred::New(env), {}, {}, {}, {}, {}});
  Backend* backend = backend_.get();
  p->work = [backend, data, op, timeoutSec, label] {
    Collectives& c = backend->lane(0);
    c.setDeadline(Transport::Clock::now() +
                  std::chrono::duration_cast<Transport::Clock::duration>(std::chrono::duration<double>(timeoutSec)));
    const size_t bytes = data->size() * sizeof(double);
    try {
      recordOp(c, c.flight().issue(), -1, OpKind::AllReduce, label, bytes,
               [&] { c.allreduce(data->data(), data->data(), data->size(), DType::F64, op, Algo::Auto); });
    } catch (const std::exception& e) {
      c.abort(e.what());  // as the executor does: the other ranks stop waiting for this one
      throw;
    }
  };
  p->settle = [data](Napi::Env env) -> Napi::Value { return toFloat64Array(env, *data); };
  return submit(env, std::move(p));
}

namespace {

Napi::Value typedBytes(const Napi::CallbackInfo& info, const char* what, const std::vector<HostBytes>& all,
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

// Op i's state after the last run as [{name, dtype, data}]; empty for ops that keep none.
Napi::Value CommunicatorWrap::state(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  uint32_t i = info[0].ToNumber().Uint32Value();
  if (i >= states_.size()) throwInvalid(env, "state: no index " + std::to_string(i) + " in the last run");
  Napi::Array out = Napi::Array::New(env, states_[i].size());
  for (uint32_t k = 0; k < states_[i].size(); ++k) {
    const NamedBuffer& b = states_[i][k];
    Napi::Object o = Napi::Object::New(env);
    o.Set("name", b.name);
    o.Set("dtype", std::string(dtypeName(b.dtype)));
    o.Set("data", Napi::Buffer<uint8_t>::Copy(env, b.data.data(), b.data.size()));
    out.Set(k, o);
  }
  return out;
}

// The last FlightRecorder::kCapacity ops of both lanes, oldest first, as plain objects.
Napi::Value CommunicatorWrap::flightRecord(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  requireOpen(env);
  // The lanes write their records without locks: they are read only while no op runs.
  if (ops_.busy()) throw makeError(env, code::kInvalid, "flightRecord: an op is in flight");
  std::vector<FlightEntry> all;
  for (int i = 0; i < backend_->lanes(); ++i) {
    std::vector<FlightEntry> lane = backend_->lane(i).flight().entries();
    all.insert(all.end(), lane.begin(), lane.end());
  }
  std::sort(all.begin(), all.end(), [](const FlightEntry& a, const FlightEntry& b) { return a.seq < b.seq; });
  if (all.size() > FlightRecorder::kCapacity) all.erase(all.begin(), all.end() - FlightRecorder::kCapacity);
  const int64_t now = steadyNowNs();
  auto peers = [&](const int32_t* ranks, uint32_t count) {
    Napi::Array a = Napi::Array::New(env);
    for (uint32_t k = 0; k < std::min<uint32_t>(count, FlightEntry::kPeers); ++k) a.Set(k, ranks[k]);
    return a;
  };
  Napi::Array out = Napi::Array::New(env, all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    const FlightEntry& e = all[i];
    Napi::Object o = Napi::Object::New(env);
    o.Set("seq", double(e.seq));
    o.Set("step", e.step);
    o.Set("op", std::string(opKindName(e.kind)));
    o.Set("stage", std::string(e.stage));
    o.Set("bytes", double(e.bytes));
    o.Set("state", std::string(opStateName(e.state)));
    o.Set("allPeers", e.allPeers);
    o.Set("to", peers(e.to, e.toCount));
    o.Set("toCount", e.toCount);
    o.Set("from", peers(e.from, e.fromCount));
    o.Set("fromCount", e.fromCount);
    o.Set("startedMsAgo", double(now - e.startNs) * 1e-6);
    o.Set("us", double((e.endNs ? e.endNs : now) - e.startNs) * 1e-3);
    out.Set(uint32_t(i), o);
  }
  return out;
}

Napi::Value CommunicatorWrap::release(const Napi::CallbackInfo& info) {
  if (backend_) backend_->release();
  return info.Env().Undefined();
}

Napi::Value CommunicatorWrap::connect(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  requireOpen(env);
  if (tcp_) tcp_->expectPeers(tcpPeers(info));
  auto p = std::make_unique<Pending>(Pending{Napi::Promise::Deferred::New(env), {}, {}, {}, {}, {}});
  Backend* backend = backend_.get();
  p->work = [backend] { backend->connect(); };
  p->settle = [](Napi::Env e) { return e.Undefined(); };
  return submit(env, std::move(p));
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

Napi::Value CommunicatorWrap::getCopyPath(const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), backend_ ? backend_->copyPath() : "");
}

Napi::Value CommunicatorWrap::getCoreRoundTrips(const Napi::CallbackInfo& info) {
  const std::vector<double> ns = backend_ ? backend_->coreRoundTrips() : std::vector<double>{};
  Napi::Array out = Napi::Array::New(info.Env(), ns.size());
  for (size_t i = 0; i < ns.size(); ++i) out.Set(uint32_t(i), Napi::Number::New(info.Env(), ns[i]));
  return out;
}

Napi::Value CommunicatorWrap::getStepsDone(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), double(stepsDone_->load(std::memory_order_relaxed)));
}

}  // namespace spmd::addon
