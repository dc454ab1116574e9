#include "addon/program_from_js.h"

#include <cmath>
#include <string_view>
#include <vector>

#include "addon/options.h"

namespace spmd::addon {
namespace {

// "one of a, b, c": what a name field accepts, from the table that parses it.
std::string oneOf(const std::vector<std::string_view>& names) {
  std::string out = "one of";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : " ") + std::string(names[i]);
  return out;
}

kernels::Fill fillFromJs(const OptionReader& r) {
  kernels::Fill f;
  std::string kind = r.string("kind");
  using K = kernels::Fill::Kind;
  if (kind == "normal") f.kind = K::Normal;
  else if (kind == "uniform") f.kind = K::Uniform;
  else if (kind == "integers") f.kind = K::Integers;
  else if (kind == "constant") f.kind = K::Constant;
  else if (kind == "rank") f.kind = K::Rank;
  else r.fail("kind", "normal, uniform, integers, constant or rank");
  f.seed = uint64_t(r.integer("seed", 0, int64_t(1) << 53));
  f.a = r.number("a");
  f.b = r.number("b");
  r.rejectUnread("a fill");
  return f;
}

// Range checks only; whether the tensor's count suits the layout is makeQuantizedAllreduce's to say.
QuantizedSpec quantizedFromJs(const OptionReader& c, int W) {
  QuantizedSpec q;
  q.bits = int(c.integer("bits", 4, 8));
  q.gatherBits = int(c.integer("gatherBits", 4, 8));
  if ((q.bits != 4 && q.bits != 8) || (q.gatherBits != 4 && q.gatherBits != 8)) c.fail("bits", "4 or 8 (and gatherBits too)");
  q.groupSize = size_t(c.integer("groupSize", 2, int64_t(1) << 30));
  if (q.groupSize % 2 != 0) c.fail("groupSize", "an even number");
  OptionReader layout = c.object("layout");
  if (layout.has("nodeOf")) {
    q.nodeOf = layout.indices("nodeOf", size_t(W));
    if (q.nodeOf.size() != size_t(W)) layout.fail("nodeOf", "one node index per rank (" + std::to_string(W) + ")");
  } else {
    q.localSize = int(layout.integer("localSize", 1, W));
    if (W % q.localSize != 0) layout.fail("localSize", "a divisor of the world size " + std::to_string(W));
  }
  layout.rejectUnread("a layout (localSize or nodeOf, not both)");
  q.errorFeedback = c.boolean("errorFeedback");
  q.beta = float(c.number("beta"));
  if (!(q.beta >= 0 && q.beta <= 1)) c.fail("beta", "a number in [0, 1]");
  q.pieceGroups = size_t(c.integer("pieceGroups", 0, int64_t(1) << 40));
  return q;
}

Reduction reductionFromJs(const OptionReader& r) {
  Reduction out;
  std::string redop = r.string("op");
  if (redop == "sum") out.op = RedOp::Sum;
  else if (redop == "max") out.op = RedOp::Max;
  else if (redop == "min") out.op = RedOp::Min;
  else r.fail("op", "sum, max or min");
  out.mean = r.boolean("mean");
  return out;
}

// An allreduce or reduce_scatter that estimates (null: the exact one). Read after the op's other fields.
void compressionFromJs(const OptionReader& r, OpSpec& s, int W) {
  if (r.isNull("compression", "an object")) return;
  if (s.coalesced) r.fail("coalesced", "false for an estimating reduce_scatter");
  if (s.inPlace) r.fail("inPlace", "false for an estimating op");
  OptionReader c = r.object("compression");
  std::string kind = c.string("kind");
  if (kind == "onebit") {
    if (s.kind != OpKind::AllReduce) c.fail("kind", "quantized: onebit estimates an allreduce");
    if (s.reduction.op != RedOp::Sum || !s.reduction.mean) r.fail("mean", "true: the 1-bit allreduce estimates the mean");
    s.compression = Compression::OneBit;
    s.oneBit.resetEvery = int(c.integer("resetEvery", 0, 1 << 30));
    s.oneBit.pieceValues = size_t(c.integer("pieceValues", 0, int64_t(1) << 40));
    s.oneBit.acrossHosts = c.boolean("acrossHosts");
  } else if (kind == "quantized") {
    s.compression = Compression::Quantized;
    s.quantized = quantizedFromJs(c, W);
  } else {
    c.fail("kind", "onebit or quantized");
  }
  c.rejectUnread("compression kind " + kind);
}

// all_to_allv's matrices: one per group (one for the whole lane), each as many rows of as many counts as
// its group has ranks, row-major.
std::vector<std::vector<size_t>> countsFromJs(const OptionReader& r, const OpSpec& s, int W) {
  const Napi::Array list = r.array("counts");
  const size_t groups = s.groups.empty() ? 1 : s.groups.size();
  if (list.Length() != groups) r.fail("counts", std::to_string(groups) + " matrices, one per group");
  std::vector<std::vector<size_t>> out(groups);
  const auto arrayOf = [&](const Napi::Value& v, size_t n) {
    if (!v.IsArray() || v.As<Napi::Array>().Length() != n) r.fail("counts", "square matrices of the groups' sizes");
    return v.As<Napi::Array>();
  };
  for (uint32_t g = 0; g < groups; ++g) {
    const size_t n = s.groups.empty() ? size_t(W) : s.groups[g].size();
    const Napi::Array rows = arrayOf(list.Get(g), n);
    for (uint32_t i = 0; i < n; ++i) {
      const Napi::Array row = arrayOf(rows.Get(i), n);
      for (uint32_t j = 0; j < n; ++j) {
        const Napi::Value v = row.Get(j);
        const double d = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : -1;
        if (d != std::floor(d) || d < 0 || d > 0x1p40) r.fail("counts", "element counts from 0 to 2^40");
        out[g].push_back(size_t(d));
      }
    }
  }
  return out;
}

// Each kind's own fields (src/comm/native.ts NativeOpOf), none defaulted: this switch is their one list here.
void kindFieldsFromJs(const OptionReader& r, OpSpec& s, int W) {
  const auto root = [&] { s.root = int(r.integer("root", 0, W - 1)); };
  const auto inPlace = [&] { s.inPlace = r.boolean("inPlace"); };
  switch (s.kind) {
    case OpKind::ReduceScatter:
      s.coalesced = r.boolean("coalesced");
      [[fallthrough]];
    case OpKind::AllReduce:
      s.reduction = reductionFromJs(r);
      inPlace();
      if (s.coalesced && s.inPlace) r.fail("inPlace", "false for a coalesced reduce_scatter");
      compressionFromJs(r, s, W);
      break;
    case OpKind::Reduce: root(); s.reduction = reductionFromJs(r); inPlace(); break;
    case OpKind::Broadcast: root(); inPlace(); break;
    case OpKind::Gather: case OpKind::Scatter: root(); break;
    case OpKind::AllGather: case OpKind::AllToAll: inPlace(); break;
    case OpKind::AllToAllv: s.counts = countsFromJs(r, s, W); break;
    case OpKind::SendRecv:
      s.shift = int(r.integer("shift", -(1 << 30), 1 << 30));
      s.peer = r.isNull("peer", "a rank") ? -1 : int(r.integer("peer", 0, W - 1));
      break;
    case OpKind::Compute:
      s.computeUs = r.number("computeUs");
      if (!(s.computeUs >= 0)) r.fail("computeUs", "microseconds, 0 or more");
      break;
    case OpKind::Barrier: break;
  }
}

// One input tensor, several for a coalesced reduce_scatter, none for barrier and compute; all of one dtype.
void checkInputs(const OptionReader& r, const OpSpec& s, const Program& p) {
  const bool none = s.kind == OpKind::Barrier || s.kind == OpKind::Compute;
  if (none && !s.inputs.empty()) r.fail("inputs", "no tensor for this op");
  if (!none && s.inputs.empty()) r.fail("inputs", "at least one tensor");
  if (!s.coalesced && s.inputs.size() > 1) r.fail("inputs", "one tensor unless coalesced");
  for (int t : s.inputs) {
    if (p.tensors[size_t(t)].dtype != p.tensors[size_t(s.inputs[0])].dtype) r.fail("inputs", "tensors of one dtype");
  }
}

// Every rank in exactly one group: a rank in none would run no op, and one in two would not know which.
std::vector<std::vector<int>> partitionFromJs(const OptionReader& r, int W) {
  Napi::Array groups = r.array("groups");
  std::vector<std::vector<int>> out;
  std::vector<bool> seen(size_t(W), false);
  for (uint32_t g = 0; g < groups.Length(); ++g) {
    Napi::Value v = groups.Get(g);
    if (!v.IsArray()) r.fail("groups", "an array of arrays of ranks");
    out.push_back(r.indicesIn(v.As<Napi::Array>(), "groups", size_t(W)));
    for (int rank : out.back()) {
      if (seen[size_t(rank)]) r.fail("groups", "a partition of the ranks (rank " + std::to_string(rank) + " twice)");
      seen[size_t(rank)] = true;
    }
  }
  for (int rank = 0; rank < W; ++rank) if (!seen[size_t(rank)]) r.fail("groups", "a partition of the ranks (rank " + std::to_string(rank) + " in none)");
  return out;
}

// The fields every op carries, then its kind's; any other field is refused.
OpSpec opFromJs(const OptionReader& r, const Program& p, int W) {
  OpSpec s;
  s.stage = r.string("stage");
  if (!parseOpKind(r.string("kind"), s.kind)) r.fail("kind", oneOf(opKindNames()));
  s.inputs = r.indices("inputs", p.tensors.size());
  if (!parseAlgo(r.string("algorithm"), s.algo)) r.fail("algorithm", oneOf(algoNames()));
  s.lane = int(r.integer("lane", 0, kMaxLanes - 1));
  s.waitFor = r.indices("waitFor", p.ops.size());
  for (int w : s.waitFor) if (p.ops[size_t(w)].lane == s.lane) r.fail("waitFor", "indices of ops on other lanes than this op's");
  if (!r.isNull("groups", "an array of arrays of ranks")) s.groups = partitionFromJs(r, W);
  s.timeoutSec = r.number("timeoutSec");
  kindFieldsFromJs(r, s, W);
  checkInputs(r, s, p);
  r.rejectUnread("op kind " + std::string(opKindName(s.kind)));
  return s;
}

}  // namespace

Program programFromJs(const Napi::Object& obj, int W) {
  OptionReader top(obj, "program.");
  Program p;
  p.warmup = int(top.integer("warmup", 0, 1 << 30));
  p.iterations = int(top.integer("iterations", 0, 1 << 30));
  p.check = top.boolean("check");
  p.timeoutSec = top.number("timeoutSec");
  Napi::Array tensors = top.array("tensors");
  for (uint32_t i = 0; i < tensors.Length(); ++i) {
    OptionReader r = top.element(tensors, "tensors", i);
    TensorSpec t;
    t.name = r.string("name");
    if (!parseDType(r.string("dtype"), t.dtype)) r.fail("dtype", oneOf(dtypeNames()));
    t.count = size_t(r.integer("count", 0, int64_t(1) << 40));
    t.fill = fillFromJs(r.object("fill"));
    r.rejectUnread("a tensor");
    p.tensors.push_back(std::move(t));
  }
  Napi::Array ops = top.array("ops");
  for (uint32_t i = 0; i < ops.Length(); ++i) p.ops.push_back(opFromJs(top.element(ops, "ops", i), p, W));
  top.rejectUnread("the program");
  return p;
}

}  // namespace spmd::addon
