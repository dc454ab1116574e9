#include "addon/program_from_js.h"

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
  return f;
}

// Range checks only; whether the tensor's count suits the layout is makeQuantizedAllreduce's to say.
QuantizedSpec quantizedFromJs(const OptionReader& r, int W) {
  QuantizedSpec q;
  q.bits = int(r.integer("bits", 8, 4, 8));
  q.gatherBits = int(r.integer("gatherBits", q.bits, 4, 8));
  if ((q.bits != 4 && q.bits != 8) || (q.gatherBits != 4 && q.gatherBits != 8)) r.fail("bits", "4 or 8 (and gatherBits too)");
  q.groupSize = size_t(r.integer("groupSize", 2048, 2, int64_t(1) << 30));
  if (q.groupSize % 2 != 0) r.fail("groupSize", "an even number");
  q.localSize = int(r.integer("localSize", 1, 1, W));
  if (W % q.localSize != 0) r.fail("localSize", "a divisor of the world size " + std::to_string(W));
  if (r.has("nodeOf")) {
    q.nodeOf = r.indices("nodeOf", size_t(W));
    if (q.nodeOf.size() != size_t(W)) r.fail("nodeOf", "one node index per rank (" + std::to_string(W) + ")");
  }
  q.errorFeedback = r.boolean("errorFeedback", false);
  q.beta = float(r.number("beta", 1));
  if (!(q.beta >= 0 && q.beta <= 1)) r.fail("beta", "a number in [0, 1]");
  return q;
}

bool hasInPlaceForm(OpKind k) {
  switch (k) {
    case OpKind::AllReduce: case OpKind::ReduceScatter: case OpKind::AllGather: case OpKind::Broadcast:
    case OpKind::AllToAll: case OpKind::Reduce:
      return true;
    default:
      return false;
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
    p.tensors.push_back(std::move(t));
  }
  Napi::Array ops = top.array("ops");
  for (uint32_t i = 0; i < ops.Length(); ++i) {
    OptionReader r = top.element(ops, "ops", i);
    OpSpec s;
    s.stage = r.string("stage");
    if (!parseOpKind(r.string("kind"), s.kind)) r.fail("kind", oneOf(opKindNames()));
    s.inputs = r.indices("inputs", p.tensors.size());
    bool needsInput = s.kind != OpKind::Barrier && s.kind != OpKind::Compute;
    if (needsInput && s.inputs.empty()) r.fail("inputs", "at least one tensor");
    s.coalesced = r.boolean("coalesced", false);
    if (!s.coalesced && s.inputs.size() > 1) r.fail("inputs", "one tensor unless coalesced");
    for (int t : s.inputs) {
      if (p.tensors[size_t(t)].dtype != p.tensors[size_t(s.inputs[0])].dtype) r.fail("inputs", "tensors of one dtype");
    }
    std::string redop = r.string("op", "sum");
    if (redop == "sum") s.reduction.op = RedOp::Sum;
    else if (redop == "max") s.reduction.op = RedOp::Max;
    else if (redop == "min") s.reduction.op = RedOp::Min;
    else r.fail("op", "sum, max or min");
    s.reduction.mean = r.boolean("mean", false);
    std::string compression = r.string("compression", "none");
    if (compression == "onebit") s.compression = Compression::OneBit;
    else if (compression == "quantized") s.compression = Compression::Quantized;
    else if (compression != "none") r.fail("compression", "none, onebit or quantized");
    if (s.compression == Compression::OneBit && s.kind != OpKind::AllReduce) r.fail("compression", "onebit only for allreduce");
    if (s.compression == Compression::Quantized && ((s.kind != OpKind::AllReduce && s.kind != OpKind::ReduceScatter) || s.coalesced))
      r.fail("compression", "quantized only for allreduce or a reduce_scatter of one tensor");
    if (s.compression == Compression::OneBit) s.reduction.mean = true;  // what the 1-bit allreduce estimates
    s.resetEvery = int(r.integer("resetEvery", 0, 0, 1 << 30));
    if (s.compression == Compression::Quantized) s.quantized = quantizedFromJs(r, W);
    s.root = int(r.integer("root", 0, 0, W - 1));
    std::string algo = r.string("algorithm", "auto");
    if (!parseAlgo(algo, s.algo)) r.fail("algorithm", oneOf(algoNames()));
    s.shift = int(r.integer("shift", 1, -(1 << 30), 1 << 30));
    s.peer = int(r.integer("peer", -1, -1, W - 1));
    s.computeUs = r.number("computeUs", 0);
    s.lane = int(r.integer("lane", 0, 0, kMaxLanes - 1));
    if (r.has("waitFor")) s.waitFor = r.indices("waitFor", i);
    for (int w : s.waitFor) if (p.ops[size_t(w)].lane == s.lane) r.fail("waitFor", "indices of ops on other lanes than this op's");
    if (r.has("groups")) s.groups = partitionFromJs(r, W);
    s.inPlace = r.boolean("inPlace", false);
    if (s.inPlace && (s.coalesced || s.compression != Compression::None || !hasInPlaceForm(s.kind))) r.fail("inPlace", "false for this op");
    s.timeoutSec = r.number("timeoutSec", p.timeoutSec);
    p.ops.push_back(std::move(s));
  }
  return p;
}

}  // namespace spmd::addon
