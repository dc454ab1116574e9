#include "runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "runtime/check.h"
#include "estimating/compressed_allreduce.h"
#include "base/error.h"
#include "estimating/estimate_error.h"
#include "runtime/flight_recorder.h"
#include "base/lane_worker.h"
#include "base/partition.h"
#include "estimating/quantized_allreduce.h"
#include "kernels/cpu/fill.h"

namespace spmd {
namespace {

using Clock = std::chrono::steady_clock;

double microsBetween(Clock::time_point t0, Clock::time_point t1) {
  return std::chrono::duration<double, std::micro>(t1 - t0).count();
}

Clock::time_point deadlineIn(double seconds, Clock::time_point from = Clock::now()) {
  return from + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Runs `allocate` for `what` (a tensor, a stage's output); a refusal becomes ERR_SPMD_NOMEM naming it, be it the
// host's (std::bad_alloc) or the device runtime's (already ERR_SPMD_NOMEM, naming only the runtime's call).
template <typename Allocate>
void allocateFor(const std::string& what, size_t bytes, Allocate allocate) {
  try {
    allocate();
  } catch (const std::bad_alloc&) {
    throwNoMemory(what, bytes);
  } catch (const CommError& e) {
    if (e.code() != code::kNoMem) throw;
    throw CommError(code::kNoMem, what + ": " + e.what());
  }
}

// "3 s", "250 ms", "40 us": a duration as the flight record writes one (log/flight-record.ts).
std::string durationText(double us) {
  char text[32];
  if (us >= 1e6) std::snprintf(text, sizeof text, "%g s", us / 1e6);
  else if (us >= 1e3) std::snprintf(text, sizeof text, "%g ms", us / 1e3);
  else std::snprintf(text, sizeof text, "%g us", us);
  return text;
}

// Calibrated busy work for overlap experiments: burns the CPU like a real kernel would. Bounded by the
// op's deadline like any other op, so a mistyped `us` cannot keep a rank from ever reaching the next one.
void computeFor(double us, Clock::time_point deadline) {
  auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::micro>(us));
  const bool cut = end > deadline;
  if (cut) end = deadline;
  volatile uint64_t sink = 0;
  while (Clock::now() < end) for (int i = 0; i < 64; ++i) sink = sink + uint64_t(i);
  if (cut) throw CommError(code::kTimeout, "deadline passed during " + durationText(us) + " of compute");
}

// The names in flight records of the barriers that align the ranks (no stage of a job can be named so).
constexpr std::string_view kStepStart = "(step start)";
constexpr std::string_view kRunEnd = "(run end)";

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
  Prepared(const OpSpec& s, Memory& m, Collectives& c) : spec(s), comm(&c), out(m, 0) {}
  uint64_t bytes() const;  // the payload, as flight records show it
  const OpSpec& spec;
  Collectives* comm;                 // where it runs: its lane, or its group's sub-communicator of the lane
  std::vector<int> members;          // in a group: the lane's ranks of this rank's group, in group order
  DType dt = DType::F32;
  size_t count = 0;  // elements of the (first) input tensor
  const void* in = nullptr;          // in the backend's memory
  const uint8_t* hostIn = nullptr;   // the same tensor on the host
  Output out;
  Buffer flatIn, flatOut;            // coalesced reduce_scatter: the one flat collective
  Buffer both;                       // in place: the one buffer, input at inAt and output at outAt (bytes)
  size_t inAt = 0, outAt = 0, outBytes = 0;
  size_t block = 0;                      // coalesced: padded elements per rank
  AllToAllvCounts vcounts;               // all_to_allv: this rank's blocks
  std::unique_ptr<EstimatingOp> estimator;  // compressed or quantized; its state persists across steps
  std::unique_ptr<EstimateError> error;     // how far the estimates are from the exact result
  uint64_t ticket = 0;                   // on a worker's lane: the op in flight this step
  std::unique_ptr<PostedOp> request;     // igather on a one-lane backend: posted on lane 0 instead
  Clock::time_point posted{}, started{}, finished{};
  uint64_t seq = 0;                      // nonblocking: the number of this step's instance, for its record
  double concurrentUs = 0;
};

Executor::Executor(Backend& backend, const Program& program)
    : backend_(backend), memory_(backend.memory()), lane0_(backend.lane(0)), data0_(backend.deviceLane(0)), program_(program) {}

void Executor::placeTensors() {
  placed_.clear();
  if (memory_.isHost()) return;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const HostBytes& t = tensors_[i];
    allocateFor("tensor " + program_.tensors[i].name, t.size(), [&] { placed_.emplace_back(memory_, t.size()); });
    memory_.upload(placed_.back().get(), t.data(), t.size());
  }
}

const void* Executor::tensor(int i) const {
  return placed_.empty() ? static_cast<const void*>(tensors_[size_t(i)].data()) : placed_[size_t(i)].get();
}

Executor::Prepared Executor::prepare(const OpSpec& s, Collectives& c) {
  const int W = c.size(), r = c.rank();
  Prepared p(s, memory_, c);
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
    case OpKind::AllToAllv:
      p.vcounts = AllToAllvCounts::of(s.counts[s.groupOf(lane0_.rank())], W, r);
      if (p.vcounts.sent() > p.count) {
        throw CommError(code::kInvalid, "stage " + s.stage + ": rank " + std::to_string(r) + " sends " + std::to_string(p.vcounts.sent()) +
                                            " elements, more than its tensor's " + std::to_string(p.count));
      }
      outCount = p.vcounts.received();
      break;
    case OpKind::ReduceScatter:
      for (int i : s.inputs) {
        Partition pi{program_.tensors[size_t(i)].count, W};
        outCount += pi.count(r);
        p.block += pi.block();
      }
      break;
    case OpKind::Barrier: case OpKind::Compute: break;
  }
  const bool flat = s.kind == OpKind::ReduceScatter && s.coalesced;
  allocateFor("stage " + s.stage + ": output", (outCount + (flat ? p.block * (W + 1) : 0)) * es, [&] {
    if (flat) {
      p.flatIn = Buffer::zeros(memory_, p.block * W * es);  // touched here, outside the timing
      p.flatOut = Buffer::zeros(memory_, p.block * es);
    }
    p.out = Output(memory_, outCount * es);
  });
  p.outBytes = outCount * es;
  if (s.inPlace) prepareInPlace(p, W, r);
  // The root broadcasts from its output buffer, which never changes: fill it once, outside the timing.
  if (s.kind == OpKind::Broadcast && r == s.root && !s.inPlace) memory_.copy(p.out.data(), p.in, p.count * es);
  return p;
}

// nccl-tests' layouts: all_gather's input is block r of its output, reduce_scatter's output block r of its
// input; the others read and write the same bytes.
void Executor::prepareInPlace(Prepared& p, int W, int r) {
  const size_t es = elementSize(p.dt), n = p.count * es;
  const Partition part{p.count, W};
  if (p.spec.kind == OpKind::AllToAll && p.count % size_t(W) != 0) {
    throw CommError(code::kInvalid, "stage " + p.spec.stage + ": in place, all_to_all needs a count divisible by its " + std::to_string(W) + " ranks");
  }
  p.both = Buffer::zeros(memory_, p.spec.kind == OpKind::AllGather ? size_t(W) * n : n);
  if (p.spec.kind == OpKind::AllGather) p.inAt = size_t(r) * n;
  if (p.spec.kind == OpKind::ReduceScatter) p.outAt = part.offset(r) * es;
}

// In place, before each step (untimed): the input back where the op reads it, as a fresh step's would be.
void Executor::refill(Prepared& p, Memory& lane) {
  if (p.both.get()) lane.copy(p.both.as<uint8_t>() + p.inAt, p.in, p.count * elementSize(p.dt));
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
  if (spec.kind == OpKind::AllToAllv) return vcounts.sent() * elementSize(dt);
  return spec.inputs.empty() ? 0 : count * elementSize(dt);
}

void Executor::execute(Collectives& c, TypedOps& typed, Prepared& p, Clock::time_point deadline) {
  const OpSpec& s = p.spec;
  const int W = c.size(), r = c.rank();
  const size_t es = elementSize(p.dt), bytes = p.count * es;
  auto* out = p.both.get() ? p.both.as<uint8_t>() + p.outAt : static_cast<uint8_t*>(p.out.data());
  const void* in = p.both.get() ? p.both.as<uint8_t>() + p.inAt : p.in;
  if (p.estimator) return p.estimator->run(c, p.in, out);
  switch (s.kind) {
    case OpKind::AllReduce:
      return typed.allreduce(c, in, out, p.count, p.dt, s.reduction, s.algo);
    case OpKind::ReduceScatter: {
      if (!s.coalesced) return typed.reduceScatter(c, in, out, p.count, p.dt, s.reduction, s.algo);
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
    case OpKind::AllGather: return c.allGather(in, out, bytes, s.algo);
    case OpKind::Gather: return c.gather(p.in, r == s.root ? out : nullptr, bytes, s.root, s.algo);
    case OpKind::Broadcast: return c.broadcast(out, bytes, s.root, s.algo);
    case OpKind::Reduce: return typed.reduce(c, in, out, p.count, p.dt, s.reduction, s.root, s.algo);
    case OpKind::Scatter: return c.scatter(r == s.root ? p.in : nullptr, out, p.count, es, s.root, s.algo);
    case OpKind::AllToAll: return c.allToAll(in, out, p.count, es, p.spec.algo);
    case OpKind::AllToAllv: return c.allToAllv(in, out, p.vcounts, es, s.algo);
    case OpKind::SendRecv: return c.sendRecv(p.in, out, bytes, s.sendTo(r, W), s.recvFrom(r, W));
    case OpKind::Barrier: return c.barrier(s.algo);
    case OpKind::Compute: return computeFor(s.computeUs, deadline);
  }
}

// One run's ops and results, and what its steps share.
struct Executor::Run {
  explicit Run(Backend& b) {
    // Each lane's copies and kernels on its own memory (a library lane's stream); lanes the backend lacks run none.
    for (int k = 0; k < kMaxLanes; ++k) typed.push_back(std::make_unique<TypedOps>(k < b.lanes() ? b.laneMemory(k) : hostMemory()));
  }
  // A group's sub-communicator of a lane, made once per run (DESIGN.md, "Graphs, streams and groups").
  struct Group {
    int lane;
    const std::vector<std::vector<int>>* partition;
    std::unique_ptr<Collectives> comm;
    std::vector<int> members;
  };
  std::vector<Group> groups;
  std::vector<Prepared> ops;
  // Ops posted on another lane and not yet completed (indices): what a lane-0 op's time is added to. A
  // list, so an op touches these and not every op of the step (a cold cache line each, after a context switch).
  std::vector<size_t> inFlight;
  std::vector<OpResult> results;
  std::vector<std::unique_ptr<TypedOps>> typed;  // per lane: each lane's thread its own scratch
  // Declared after `ops` and `groups`: destroyed first, so no thread outlives what its ops reference.
  std::vector<std::unique_ptr<LaneWorker>> workers = std::vector<std::unique_ptr<LaneWorker>>(kMaxLanes);
  Clock::time_point stepStarted{};
  bool timed = false;  // this step's times are kept (warmup steps' are not)
};

namespace {

// Room for every timed step's numbers before the first: a step then writes into memory it already has,
// never reallocating a series (and copying it) between ops.
void reserveSteps(OpResult& r, int iterations, bool nonblocking) {
  const size_t n = size_t(std::max(iterations, 0));
  r.timeUs.reserve(n);
  r.startUs.reserve(n);
  if (!nonblocking) return;
  r.overallUs.reserve(n);
  r.concurrentUs.reserve(n);
}

// What one op moved over each kind of link: the transport's counters after it less those before.
void addLinkUsage(LinkUsage& sum, const LinkUsage& before, const LinkUsage& after) {
  sum.split = after.split;
  sum.shmBytes += after.shmBytes - before.shmBytes;
  sum.tcpBytes += after.tcpBytes - before.tcpBytes;
  sum.shmUs += after.shmUs - before.shmUs;
  sum.tcpUs += after.tcpUs - before.tcpUs;
}

CommError inStage(const OpSpec& s, const std::exception& e) {
  return CommError(codeOf(e), "stage " + s.stage + ": " + describe(e));
}

}  // namespace

void Executor::fillTensors() {
  tensors_.clear();
  for (const TensorSpec& t : program_.tensors) {
    const size_t bytes = t.count * elementSize(t.dtype);
    allocateFor("tensor " + t.name, bytes, [&] { tensors_.emplace_back(bytes); });
    kernels::fillBuffer(t.fill, t.dtype, lane0_.rank(), tensors_.back().data(), t.count);
  }
  placeTensors();
}

// The lane an op's stream runs on: lane 0 over the backend's memory, or a worker's host lane. A backend
// with fewer lanes (MPI granted only MPI_THREAD_FUNNELED; the library backends) runs igather as a gather
// posted on lane 0, and refuses other streams.
Collectives& Executor::laneOf(const OpSpec& s) {
  if (s.lane == 0) return data0_;
  if (s.lane < backend_.lanes()) return backend_.deviceLane(s.lane);
  if (s.kind == OpKind::Gather) return data0_;
  throw CommError(code::kUnsupported, "stage " + s.stage + ": backend " + backend_.name() + " has " + std::to_string(backend_.lanes()) +
                                          " lane, so it runs no stream but \"main\" (igather aside)");
}

// The op's communicator: its lane, or the sub-communicator of the lane for this rank's group, split once
// per (lane, partition) in program order, so every rank makes the same splits in the same order.
Collectives& Executor::communicator(Run& run, const OpSpec& s) {
  Collectives& lane = laneOf(s);
  if (s.groups.empty()) return lane;
  for (Run::Group& g : run.groups) if (g.lane == s.lane && *g.partition == s.groups) return *g.comm;
  const int rank = lane.rank();
  const auto color = int(s.groupOf(rank));
  lane.setDeadline(deadlineIn(program_.timeoutSec));
  try {
    run.groups.push_back({s.lane, &s.groups, lane.split(color, rank), s.groups[size_t(color)]});
  } catch (const std::exception& e) {
    throw inStage(s, e);
  }
  return *run.groups.back().comm;
}

void Executor::prepareAll(Run& run) {
  run.ops.reserve(program_.ops.size());
  run.inFlight.reserve(program_.ops.size());
  run.results.resize(program_.ops.size());
  for (size_t i = 0; i < program_.ops.size(); ++i) {
    const OpSpec& s = program_.ops[i];
    reserveSteps(run.results[i], program_.iterations, s.lane > 0);
    Collectives& c = communicator(run, s);
    run.ops.push_back(prepare(s, c));
    for (const Run::Group& g : run.groups) if (&*g.comm == &c) run.ops.back().members = g.members;
    // An estimating op has one algorithm of its own, not one of the backend's.
    try {
      run.results[i].algorithm = s.compression != Compression::None
                                     ? Algo::Auto
                                     : c.resolve(s.kind, s.algo, run.ops.back().count * elementSize(run.ops.back().dt));
    } catch (const CommError& e) {  // an algorithm this backend lacks
      throw CommError(e.code(), "stage " + s.stage + ": " + e.what());
    }
    run.results[i].outType = run.ops.back().dt;
    if (s.lane > 0 && s.lane < backend_.lanes() && !run.workers[size_t(s.lane)]) startWorker(run, s.lane);
  }
}

// A lane's worker, whose thread is made ready for the lane's ops first (a failure there surfaces at the
// first wait on the lane, naming the stage waited for).
void Executor::startWorker(Run& run, int lane) {
  run.workers[size_t(lane)] = std::make_unique<LaneWorker>();
  run.workers[size_t(lane)]->post([this, lane] { backend_.enterLane(lane); });
}

// Untimed, before the first step: each estimating stage's state (a quantized one splits its lane into its
// sub-communicators, which is collective) and the exact result its estimates are measured against.
void Executor::setUpEstimators(Run& run) {
  const int W = lane0_.size(), rank = lane0_.rank();
  for (Prepared& p : run.ops) {
    const OpSpec& s = p.spec;
    if (s.compression == Compression::None) continue;
    lane0_.setDeadline(deadlineIn(s.timeoutSec));
    p.comm->setDeadline(deadlineIn(s.timeoutSec));
    const bool full = s.kind == OpKind::AllReduce;
    try {
      recordOp(lane0_, lane0_.flight().issue(), -1, s.kind, s.stage, p.bytes(), [&] {
        p.estimator = s.compression == Compression::OneBit
                          ? makeCompressedAllreduce(memory_, rank, W, p.count, p.dt, s.oneBit)
                          : makeQuantizedAllreduce(memory_, *p.comm, p.count, p.dt, s.quantized, full, s.reduction.mean);
        using Layout = EstimateError::Layout;
        p.error = std::make_unique<EstimateError>(lane0_, p.hostIn, p.count, p.dt, s.reduction.mean, full ? Layout::Full : Layout::Shard);
      });
    } catch (const std::exception& e) {
      throw inStage(s, e);
    }
  }
}

// Aligns the ranks so each op's time measures the op, not the previous step's skew.
void Executor::stepStart(Run& run, int step) {
  run.timed = step >= program_.warmup;
  alignRanks(step);
  run.stepStarted = Clock::now();
}

// A barrier on lane 0: at the start of `step`, or after the last step (`step` = their count), where it
// keeps a rank's wrap-up (results, reports) from taking the core of a rank still inside its last timed op
// (on shared cores that made the last step's last op milliseconds long).
void Executor::alignRanks(int step) {
  if (lane0_.size() <= 1) return;
  const bool end = step == program_.warmup + program_.iterations;
  lane0_.setDeadline(deadlineIn(program_.timeoutSec));
  try {
    recordOp(lane0_, lane0_.flight().issue(), step, OpKind::Barrier, end ? kRunEnd : kStepStart, 0, [&] { lane0_.barrier(Algo::Auto); });
  } catch (const std::exception& e) {
    throw CommError(codeOf(e), (end ? "after the last step: " : "at the start of step " + std::to_string(step) + ": ") + e.what());
  }
}

// An op on another stream: on its lane's worker, after what it waits for on other lanes, or, where the
// backend has no such lane, an igather posted on lane 0 and completed when needed.
void Executor::post(Run& run, Prepared& p, int step) {
  const OpSpec& s = p.spec;
  FlightRecorder& flight0 = lane0_.flight();  // numbers every op, the other lanes' included
  p.posted = Clock::now();
  p.concurrentUs = 0;
  run.inFlight.push_back(size_t(&p - run.ops.data()));
  p.seq = flight0.issue();
  LaneWorker* worker = run.workers[size_t(s.lane)].get();
  if (!worker) return postOnLane0(p, step);
  std::vector<std::pair<LaneWorker*, uint64_t>> waits;
  for (int w : s.waitFor) {
    const Prepared& q = run.ops[size_t(w)];
    if (q.spec.lane != 0) waits.emplace_back(run.workers[size_t(q.spec.lane)].get(), q.ticket);  // lane 0's: done
  }
  p.ticket = worker->post([&, this, step, waits = std::move(waits)] {
    for (auto [other, ticket] : waits) other->wait(ticket);  // rethrows that lane's failure: this one stops too
    refill(p, backend_.laneMemory(s.lane));  // on the lane's stream, ahead of the op
    const Clock::time_point deadline = deadlineIn(s.timeoutSec);
    p.comm->setDeadline(deadline);
    p.started = Clock::now();
    try {
      recordOp(backend_.lane(s.lane), p.seq, step, s.kind, s.stage, p.bytes(), [&] {
        execute(*p.comm, *run.typed[size_t(s.lane)], p, deadline);
        backend_.laneMemory(s.lane).synchronize();
      });
    } catch (const std::exception& e) {
      throw inStage(s, e);
    }
    p.finished = Clock::now();
    observe(p);
  });
}

void Executor::postOnLane0(Prepared& p, int step) {
  const OpSpec& s = p.spec;
  FlightRecorder& flight0 = lane0_.flight();
  lane0_.setDeadline(deadlineIn(s.timeoutSec));
  p.started = p.posted;
  flight0.begin(p.seq, step, s.kind, s.stage, p.bytes());
  try {
    p.request = p.comm->postGather(p.in, p.comm->rank() == s.root ? p.out.data() : nullptr, p.count * elementSize(p.dt), s.root, s.algo);
    if (!p.request) throw CommError(code::kUnsupported, "this backend has no lane for another stream");
  } catch (const std::exception& e) {
    flight0.end(p.seq, failedState(e));
    throw inStage(s, e);
  }
}

// Waits for op i, if in flight on another lane, and keeps its times.
void Executor::complete(Run& run, size_t i) {
  Prepared& p = run.ops[i];
  const auto flying = std::find(run.inFlight.begin(), run.inFlight.end(), i);
  if (flying == run.inFlight.end()) return;
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
    run.workers[size_t(p.spec.lane)]->wait(p.ticket);
  }
  run.inFlight.erase(flying);
  if (!run.timed) return;
  keepTimes(run, i, p.started, p.finished);
  run.results[i].overallUs.push_back(microsBetween(p.posted, Clock::now()));
  run.results[i].concurrentUs.push_back(p.concurrentUs);
}

void Executor::keepTimes(Run& run, size_t i, Clock::time_point t0, Clock::time_point t1) {
  run.results[i].timeUs.push_back(microsBetween(t0, t1));
  run.results[i].startUs.push_back(microsBetween(run.stepStarted, t0));
}

// After an estimating op, untimed: its flags checked (no timed step waits on them) and its error measured.
void Executor::observe(Prepared& p) {
  if (!p.estimator) return;
  try {
    p.estimator->verify();
  } catch (const std::exception& e) {
    throw inStage(p.spec, e);
  }
  if (p.error) p.error->observe(p.out.fetch(memory_).data());
}

// An op on lane 0, timed; recorded by hand rather than with recordOp, so the op's own timestamps serve the
// record too.
void Executor::runTimed(Run& run, size_t i, int step) {
  Prepared& p = run.ops[i];
  const OpSpec& s = p.spec;
  FlightRecorder& flight0 = lane0_.flight();
  refill(p, memory_);
  const uint64_t seq = flight0.issue();
  const LinkUsage linksBefore = data0_.linkUsage();
  // One clock read for the op's start, its deadline and its flight record.
  auto t0 = Clock::now();
  const Clock::time_point deadline = deadlineIn(s.timeoutSec, t0);
  p.comm->setDeadline(deadline);
  flight0.begin(seq, step, s.kind, s.stage, p.bytes(), nanos(t0));
  try {
    execute(*p.comm, *run.typed[0], p, deadline);
    memory_.synchronize();  // kernels and copies the op issued are part of its time
  } catch (const std::exception& e) {
    flight0.end(seq, failedState(e));
    throw inStage(s, e);
  }
  auto t1 = Clock::now();
  flight0.end(seq, OpState::Done, nanos(t1));
  if (run.timed) {
    keepTimes(run, i, t0, t1);
    addLinkUsage(run.results[i].links, linksBefore, data0_.linkUsage());
  }
  const double us = microsBetween(t0, t1);
  for (size_t k : run.inFlight) run.ops[k].concurrentUs += us;
  observe(p);
}

// Posts the ops of other lanes from `next` on, in schedule order, until one waits for a lane-0 op not yet
// run (ops before `ran`) or, posted on lane 0 itself, for its place in lane 0's order. So a stream's stage
// starts as soon as what it waits for has, not when lane 0 reaches it, and tickets exist before any wait.
void Executor::postReady(Run& run, size_t& next, size_t ran, int step) {
  for (; next < run.ops.size(); ++next) {
    Prepared& p = run.ops[next];
    if (p.spec.lane == 0) continue;
    if (!run.workers[size_t(p.spec.lane)] && next > ran) return;
    for (int w : p.spec.waitFor) if (run.ops[size_t(w)].spec.lane == 0 && size_t(w) >= ran) return;
    post(run, p, step);
  }
}

void Executor::runStep(Run& run, int step) {
  stepStart(run, step);
  size_t next = 0;
  for (size_t i = 0; i < run.ops.size(); ++i) {
    if (run.ops[i].spec.lane != 0) continue;
    postReady(run, next, i, step);
    for (int w : run.ops[i].spec.waitFor) complete(run, size_t(w));
    runTimed(run, i, step);
  }
  postReady(run, next, run.ops.size(), step);
  // The step ends when every stream has drained.
  for (size_t i = 0; i < run.ops.size(); ++i) complete(run, i);
  if (progress_) progress_->store(step + 1, std::memory_order_relaxed);
}

// After the last step: each output checked, and each estimating op's error series and state.
void Executor::finish(Run& run) {
  for (size_t i = 0; i < run.ops.size(); ++i) {
    Prepared& p = run.ops[i];
    OpResult& r = run.results[i];
    if (p.both.get()) memory_.copy(p.out.data(), p.both.as<uint8_t>() + p.outAt, p.outBytes);  // in place: its output
    HostBytes& out = p.out.fetch(memory_);
    if (program_.check) {
      CheckResult c = checkOutput(program_, program_.ops[i], p.comm->rank(), p.comm->size(), out, p.members);
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
  Run run(backend_);
  try {
    prepareAll(run);
    setUpEstimators(run);
    const int steps = program_.warmup + program_.iterations;
    for (int s = 0; s < steps; ++s) runStep(run, s);
    alignRanks(steps);
  } catch (const std::exception& e) {
    // Every lane: a peer may wait on any of them, and a worker still running here must fail fast.
    for (int k = 0; k < backend_.lanes(); ++k) backend_.lane(k).abort(e.what());
    throw;
  }
  finish(run);
  return std::move(run.results);
}

}  // namespace spmd
