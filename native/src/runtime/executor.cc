#include "runtime/executor.h"

#include <chrono>
#include <memory>

#include "runtime/check.h"
#include "estimating/compressed_allreduce.h"
#include "base/error.h"
#include "estimating/estimate_error.h"
#include "runtime/flight_recorder.h"
#include "runtime/lane_worker.h"
#include "base/partition.h"
#include "estimating/quantized_allreduce.h"
#include "kernels/cpu/fill.h"

namespace spmd {
namespace {

using Clock = std::chrono::steady_clock;

double microsBetween(Clock::time_point t0, Clock::time_point t1) {
  return std::chrono::duration<double, std::micro>(t1 - t0).count();
}

// A failure's code, for the error that says where it happened.
const char* failedCode(const std::exception& e) {
  const auto* ce = dynamic_cast<const CommError*>(&e);
  return ce ? ce->code() : code::kSystem;
}

Clock::time_point deadlineIn(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Calibrated busy work for overlap experiments: burns the CPU like a real kernel would. Bounded by the
// op's deadline like any other op, so a mistyped `us` cannot keep a rank from ever reaching the next one.
void computeFor(double us, Clock::time_point deadline) {
  auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::micro>(us));
  const bool cut = end > deadline;
  if (cut) end = deadline;
  volatile uint64_t sink = 0;
  while (Clock::now() < end) for (int i = 0; i < 64; ++i) sink = sink + uint64_t(i);
  if (cut) throw CommError(code::kTimeout, "deadline passed during " + std::to_string(us) + " us of compute");
}

// The step-start barrier's name in flight records (no stage of a job can be named so).
constexpr std::string_view kStepStart = "(step start)";

// An op's output: in the backend's memory, and on the host where checks, dumps and error measurements read
// it (one and the same buffer when that memory is the host's).
class Output {
 public:
  Output(Memory& m, size_t bytes) : host_(bytes), placed_(m.isHost() ? Buffer() : Buffer(m, bytes)) {}
  void* data() { return placed_.get() ? placed_.get() : host_.data(); }
  // The host copy, brought up to date.
  HostBytes& fetch(Memory& m) {
    if (placed_.get()) m.download(host_.data(), placed_.get(), host_.size());
    return host_;
  }

 private:
  HostBytes host_;
  Buffer placed_;
};

}  // namespace

struct Executor::Prepared {
  Prepared(const OpSpec& s, Memory& m) : spec(s), out(m, 0) {}
  uint64_t bytes() const;  // the payload, as flight records show it
  const OpSpec& spec;
  DType dt = DType::F32;
  size_t count = 0;  // elements of the (first) input tensor
  const void* in = nullptr;          // in the backend's memory
  const uint8_t* hostIn = nullptr;   // the same tensor on the host
  Output out;
  Buffer flatIn, flatOut;            // coalesced reduce_scatter: the one flat collective
  size_t block = 0;                      // coalesced: padded elements per rank
  std::unique_ptr<EstimatingOp> estimator;  // compressed or quantized; its state persists across steps
  std::unique_ptr<EstimateError> error;     // how far the estimates are from the exact result
  uint64_t ticket = 0;                   // nonblocking: the lane-1 op in flight this step
  std::unique_ptr<PostedOp> request;     // nonblocking on a one-lane backend: posted on lane 0 instead
  Clock::time_point posted{}, started{}, finished{};
  uint64_t seq = 0;                      // nonblocking: the number of this step's instance, for its record
  double concurrentUs = 0;
  bool inFlight = false;
};

Executor::Executor(Backend& backend, const Program& program)
    : memory_(backend.memory()), lane0_(backend.lane(0)), data0_(backend.deviceLane()),
      lane1_(backend.lanes() > 1 ? &backend.lane(1) : nullptr), program_(program) {}

void Executor::placeTensors() {
  placed_.clear();
  if (memory_.isHost()) return;
  for (const HostBytes& t : tensors_) {
    placed_.emplace_back(memory_, t.size());
    memory_.upload(placed_.back().get(), t.data(), t.size());
  }
}

const void* Executor::tensor(int i) const {
  return placed_.empty() ? static_cast<const void*>(tensors_[size_t(i)].data()) : placed_[size_t(i)].get();
}

Executor::Prepared Executor::prepare(const OpSpec& s) {
  const int W = lane0_.size(), r = lane0_.rank();
  Prepared p(s, memory_);
  if (s.inputs.empty()) return p;
  const TensorSpec& t = program_.tensors[size_t(s.inputs[0])];
  p.dt = t.dtype;
  p.count = t.count;
  p.in = tensor(s.inputs[0]);
  p.hostIn = tensors_[size_t(s.inputs[0])].data();
  if (s.reduction.mean && !isFloat(p.dt)) {
    throw CommError(code::kInvalid, "stage " + s.stage + ": mean is not defined for " + std::string(dtypeName(p.dt)));
  }
  const size_t es = elementSize(p.dt);
  const Partition part{p.count, W};
  size_t outCount = 0;
  switch (s.kind) {
    case OpKind::AllReduce: case OpKind::SendRecv: case OpKind::Broadcast: outCount = p.count; break;
    case OpKind::Reduce: outCount = r == s.root ? p.count : 0; break;
    case OpKind::AllGather: outCount = size_t(W) * p.count; break;
    case OpKind::Gather: outCount = r == s.root ? size_t(W) * p.count : 0; break;
    case OpKind::Scatter: outCount = part.count(r); break;
    case OpKind::AllToAll: outCount = size_t(W) * part.count(r); break;
    case OpKind::ReduceScatter:
      for (int i : s.inputs) {
        Partition pi{program_.tensors[size_t(i)].count, W};
        outCount += pi.count(r);
        p.block += pi.block();
      }
      if (s.coalesced) {
        p.flatIn = Buffer::zeros(memory_, p.block * W * es);  // touched here, outside the timing
        p.flatOut = Buffer::zeros(memory_, p.block * es);
      }
      break;
    case OpKind::Barrier: case OpKind::Compute: break;
  }
  p.out = Output(memory_, outCount * es);
  // The root broadcasts from its output buffer, which never changes: fill it once, outside the timing.
  if (s.kind == OpKind::Broadcast && r == s.root) memory_.copy(p.out.data(), p.in, p.count * es);
  return p;
}

void Executor::packCoalesced(Prepared& p, int W) {
  // Rank-major: for each rank j, block j of every tensor, each padded to ceil(n_i / W) with zeros.
  const size_t es = elementSize(p.dt);
  auto* flat = p.flatIn.as<uint8_t>();
  for (int j = 0; j < W; ++j) {
    for (int t : p.spec.inputs) {
      Partition part{program_.tensors[size_t(t)].count, W};
      size_t len = part.count(j) * es, padded = part.block() * es;
      memory_.copy(flat, static_cast<const uint8_t*>(tensor(t)) + part.offset(j) * es, len);
      memory_.zero(flat + len, padded - len);
      flat += padded;
    }
  }
}

uint64_t Executor::Prepared::bytes() const {
  if (flatIn.bytes()) return flatIn.bytes();
  return spec.inputs.empty() ? 0 : count * elementSize(dt);
}

void Executor::execute(Collectives& c, TypedOps& typed, Prepared& p, Clock::time_point deadline) {
  const OpSpec& s = p.spec;
  const int W = c.size(), r = c.rank();
  const size_t es = elementSize(p.dt), bytes = p.count * es;
  auto* out = static_cast<uint8_t*>(p.out.data());
  if (p.estimator) return p.estimator->run(c, p.in, out);
  switch (s.kind) {
    case OpKind::AllReduce:
      return typed.allreduce(c, p.in, out, p.count, p.dt, s.reduction, s.algo);
    case OpKind::ReduceScatter: {
      if (!s.coalesced) return typed.reduceScatter(c, p.in, out, p.count, p.dt, s.reduction, s.algo);
      packCoalesced(p, W);
      typed.reduceScatter(c, p.flatIn.get(), p.flatOut.get(), p.block * W, p.dt, s.reduction, s.algo);
      const auto* mine = p.flatOut.as<uint8_t>();
      for (int t : s.inputs) {
        Partition part{program_.tensors[size_t(t)].count, W};
        memory_.copy(out, mine, part.count(r) * es);
        out += part.count(r) * es;
        mine += part.block() * es;
      }
      return;
    }
    case OpKind::AllGather: return c.allGather(p.in, out, bytes, s.algo);
    case OpKind::Gather: return c.gather(p.in, r == s.root ? out : nullptr, bytes, s.root, s.algo);
    case OpKind::Broadcast: return c.broadcast(out, bytes, s.root, s.algo);
    case OpKind::Reduce: return typed.reduce(c, p.in, out, p.count, p.dt, s.reduction, s.root, s.algo);
    case OpKind::Scatter: return c.scatter(r == s.root ? p.in : nullptr, out, p.count, es, s.root, s.algo);
    case OpKind::AllToAll: return c.allToAll(p.in, out, p.count, es, p.spec.algo);
    case OpKind::SendRecv: return c.sendRecv(p.in, out, bytes, s.sendTo(r, W), s.recvFrom(r, W));
    case OpKind::Barrier: return c.barrier();
    case OpKind::Compute: return computeFor(s.computeUs, deadline);
  }
}

// One run's ops and results, and what its steps share.
struct Executor::Run {
  explicit Run(Memory& m) : typed0(m), typed1(hostMemory()) {}
  std::vector<Prepared> ops;
  std::vector<OpResult> results;
  // Declared after `ops`: destroyed first, so its thread never outlives the ops it references.
  std::unique_ptr<LaneWorker> worker;
  TypedOps typed0, typed1;
  bool timed = false;  // this step's times are kept (warmup steps' are not)
};

namespace {

// What one op moved over each kind of link: the transport's counters after it less those before.
void addLinkUsage(LinkUsage& sum, const LinkUsage& before, const LinkUsage& after) {
  sum.split = after.split;
  sum.shmBytes += after.shmBytes - before.shmBytes;
  sum.tcpBytes += after.tcpBytes - before.tcpBytes;
  sum.shmUs += after.shmUs - before.shmUs;
  sum.tcpUs += after.tcpUs - before.tcpUs;
}

CommError inStage(const OpSpec& s, const std::exception& e) {
  return CommError(failedCode(e), "stage " + s.stage + ": " + e.what());
}

}  // namespace

void Executor::fillTensors() {
  tensors_.clear();
  for (const TensorSpec& t : program_.tensors) {
    tensors_.emplace_back(t.count * elementSize(t.dtype));
    kernels::fillBuffer(t.fill, t.dtype, lane0_.rank(), tensors_.back().data(), t.count);
  }
  placeTensors();
}

void Executor::prepareAll(Run& run) {
  run.ops.reserve(program_.ops.size());
  run.results.resize(program_.ops.size());
  bool anyNonblocking = false;
  for (size_t i = 0; i < program_.ops.size(); ++i) {
    const OpSpec& s = program_.ops[i];
    run.ops.push_back(prepare(s));
    Collectives& lane = s.nonblocking && lane1_ ? *lane1_ : data0_;
    // An estimating op has one algorithm of its own, not one of the backend's.
    try {
      run.results[i].algorithm = s.compression != Compression::None
                                     ? Algo::Auto
                                     : lane.resolve(s.kind, s.algo, run.ops.back().count * elementSize(run.ops.back().dt));
    } catch (const CommError& e) {  // an algorithm this backend lacks
      throw CommError(e.code(), "stage " + s.stage + ": " + e.what());
    }
    run.results[i].outType = run.ops.back().dt;
    anyNonblocking |= s.nonblocking;
  }
  if (anyNonblocking && lane1_) run.worker = std::make_unique<LaneWorker>();
}

// Untimed, before the first step: each estimating stage's state (a quantized one splits the lane into its
// sub-communicators, which is collective) and the exact result its estimates are measured against.
void Executor::setUpEstimators(Run& run) {
  const int W = lane0_.size(), rank = lane0_.rank();
  for (Prepared& p : run.ops) {
    const OpSpec& s = p.spec;
    if (s.compression == Compression::None) continue;
    lane0_.setDeadline(deadlineIn(s.timeoutSec));
    const bool full = s.kind == OpKind::AllReduce;
    try {
      recordOp(lane0_, lane0_.flight().issue(), -1, s.kind, s.stage, p.bytes(), [&] {
        p.estimator = s.compression == Compression::OneBit
                          ? makeCompressedAllreduce(memory_, rank, W, p.count, p.dt, s.resetEvery)
                          : makeQuantizedAllreduce(memory_, data0_, p.count, p.dt, s.quantized, full, s.reduction.mean);
        using Layout = EstimateError::Layout;
        p.error = std::make_unique<EstimateError>(lane0_, p.hostIn, p.count, p.dt, s.reduction.mean, full ? Layout::Full : Layout::Shard);
      });
    } catch (const std::exception& e) {
      throw inStage(s, e);
    }
  }
}

// Aligns the ranks so each op's time measures the op, not the previous step's skew.
void Executor::stepStart(int step) {
  if (lane0_.size() == 1) return;
  lane0_.setDeadline(deadlineIn(program_.timeoutSec));
  try {
    recordOp(lane0_, lane0_.flight().issue(), step, OpKind::Barrier, kStepStart, 0, [&] { lane0_.barrier(); });
  } catch (const std::exception& e) {
    throw CommError(failedCode(e), "at the start of step " + std::to_string(step) + ": " + e.what());
  }
}

// A nonblocking op: on the second lane's worker, or, with one lane (MPI granted only MPI_THREAD_FUNNELED),
// posted on lane 0 and completed when needed.
void Executor::post(Run& run, Prepared& p, int step) {
  const OpSpec& s = p.spec;
  FlightRecorder& flight0 = lane0_.flight();  // numbers every op, the other lane's included
  p.posted = Clock::now();
  p.concurrentUs = 0;
  p.inFlight = true;
  p.seq = flight0.issue();
  if (run.worker) {
    p.ticket = run.worker->post([&, this, step] {
      const Clock::time_point deadline = deadlineIn(s.timeoutSec);
      lane1_->setDeadline(deadline);
      p.started = Clock::now();
      try {
        recordOp(*lane1_, p.seq, step, s.kind, s.stage, p.bytes(), [&] { execute(*lane1_, run.typed1, p, deadline); });
      } catch (const std::exception& e) {
        throw inStage(s, e);
      }
      p.finished = Clock::now();
    });
    return;
  }
  lane0_.setDeadline(deadlineIn(s.timeoutSec));
  p.started = p.posted;
  flight0.begin(p.seq, step, s.kind, s.stage, p.bytes());
  try {
    if (s.kind == OpKind::Gather) {
      p.request = data0_.postGather(p.in, lane0_.rank() == s.root ? p.out.data() : nullptr, p.count * elementSize(p.dt), s.root, s.algo);
    }
    if (!p.request) throw CommError(code::kUnsupported, "this backend has no second lane for nonblocking ops");
  } catch (const std::exception& e) {
    flight0.end(p.seq, failedState(e));
    throw inStage(s, e);
  }
}

// Waits for nonblocking op i, if in flight, and keeps its times.
void Executor::complete(Run& run, size_t i) {
  Prepared& p = run.ops[i];
  if (!p.inFlight) return;
  if (p.request) {
    try {
      p.request->wait();
    } catch (const std::exception& e) {
      lane0_.flight().end(p.seq, failedState(e));
      throw inStage(p.spec, e);
    }
    lane0_.flight().end(p.seq, OpState::Done);
    p.request.reset();
    p.finished = Clock::now();
  } else {
    run.worker->wait(p.ticket);
  }
  p.inFlight = false;
  if (!run.timed) return;
  run.results[i].timeUs.push_back(microsBetween(p.started, p.finished));
  run.results[i].overallUs.push_back(microsBetween(p.posted, Clock::now()));
  run.results[i].concurrentUs.push_back(p.concurrentUs);
}

// A blocking op on lane 0, timed; recorded by hand rather than with recordOp, so the op's own timestamps
// serve the record too.
void Executor::runTimed(Run& run, size_t i, int step) {
  Prepared& p = run.ops[i];
  const OpSpec& s = p.spec;
  FlightRecorder& flight0 = lane0_.flight();
  const Clock::time_point deadline = deadlineIn(s.timeoutSec);
  lane0_.setDeadline(deadline);
  const uint64_t seq = flight0.issue();
  const LinkUsage linksBefore = data0_.linkUsage();
  auto t0 = Clock::now();
  flight0.begin(seq, step, s.kind, s.stage, p.bytes(), nanos(t0));
  try {
    execute(data0_, run.typed0, p, deadline);
    memory_.synchronize();  // kernels and copies the op issued are part of its time
  } catch (const std::exception& e) {
    flight0.end(seq, failedState(e));
    throw inStage(s, e);
  }
  auto t1 = Clock::now();
  flight0.end(seq, OpState::Done, nanos(t1));
  const double us = microsBetween(t0, t1);
  if (run.timed) {
    run.results[i].timeUs.push_back(us);
    addLinkUsage(run.results[i].links, linksBefore, data0_.linkUsage());
  }
  for (Prepared& q : run.ops) if (q.inFlight) q.concurrentUs += us;
  if (!p.estimator) return;
  try {
    p.estimator->verify();  // after the timing: no timed step waits on its flags
  } catch (const std::exception& e) {
    throw inStage(s, e);
  }
  if (p.error) p.error->observe(p.out.fetch(memory_).data());  // after the timing, so untimed
}

void Executor::runStep(Run& run, int step) {
  run.timed = step >= program_.warmup;
  stepStart(step);
  for (size_t i = 0; i < run.ops.size(); ++i) {
    for (int w : run.ops[i].spec.waitFor) complete(run, size_t(w));
    if (run.ops[i].spec.nonblocking) post(run, run.ops[i], step);
    else runTimed(run, i, step);
  }
  for (size_t i = 0; i < run.ops.size(); ++i) complete(run, i);
  if (progress_) progress_->store(step + 1, std::memory_order_relaxed);
}

// After the last step: each output checked, and each estimating op's error series and state.
void Executor::finish(Run& run) {
  for (size_t i = 0; i < run.ops.size(); ++i) {
    Prepared& p = run.ops[i];
    OpResult& r = run.results[i];
    HostBytes& out = p.out.fetch(memory_);
    if (program_.check) {
      CheckResult c = checkOutput(program_, program_.ops[i], lane0_.rank(), lane0_.size(), out);
      r.wrong = c.wrong;
      r.checked = c.checked;
      r.mismatches = std::move(c.mismatches);
    }
    r.output = std::move(out);
    if (p.estimator) {
      r.series = p.error->series();
      r.series.push_back({"wireBytes", {double(p.estimator->wireBytes())}});
      r.state = p.estimator->state();
    }
  }
}

std::vector<OpResult> Executor::run() {
  fillTensors();
  Run run(memory_);
  prepareAll(run);
  try {
    setUpEstimators(run);
    for (int s = 0; s < program_.warmup + program_.iterations; ++s) runStep(run, s);
  } catch (const std::exception& e) {
    lane0_.abort(e.what());
    throw;
  }
  finish(run);
  return std::move(run.results);
}

}  // namespace spmd
