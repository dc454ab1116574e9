#include "addon/program_from_js.h"

#include <cmath>

#include "addon/errors.h"

namespace spmd::addon {
namespace {

class Reader {
 public:
  Reader(Napi::Object obj, std::string where) : obj_(obj), where_(std::move(where)) {}

  double number(const char* key, double fallback) const {
    Napi::Value v = obj_.Get(key);
    if (v.IsUndefined()) return fallback;
    if (!v.IsNumber()) fail(key, "a number");
    return v.As<Napi::Number>().DoubleValue();
  }
  int64_t integer(const char* key, int64_t fallback, int64_t lo, int64_t hi) const {
    double d = number(key, double(fallback));
    if (d != std::floor(d) || d < double(lo) || d > double(hi)) fail(key, "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return int64_t(d);
  }
  bool boolean(const char* key) const {
    Napi::Value v = obj_.Get(key);
    if (v.IsUndefined()) return false;
    if (!v.IsBoolean()) fail(key, "a boolean");
    return v.As<Napi::Boolean>().Value();
  }
  std::string string(const char* key, const char* fallback = nullptr) const {
    Napi::Value v = obj_.Get(key);
    if (fallback && v.IsUndefined()) return fallback;
    if (!v.IsString()) fail(key, "a string");
    return v.As<Napi::String>().Utf8Value();
  }
  Napi::Array array(const char* key) const {
    Napi::Value v = obj_.Get(key);
    if (v.IsUndefined()) return Napi::Array::New(obj_.Env());
    if (!v.IsArray()) fail(key, "an array");
    return v.As<Napi::Array>();
  }
  Napi::Object object(const char* key) const {
    Napi::Value v = obj_.Get(key);
    if (!v.IsObject()) fail(key, "an object");
    return v.As<Napi::Object>();
  }
  std::vector<int> indices(const char* key, size_t limit) const {
    Napi::Array a = array(key);
    std::vector<int> out;
    for (uint32_t i = 0; i < a.Length(); ++i) {
      Napi::Value v = a.Get(i);
      if (!v.IsNumber() || v.As<Napi::Number>().DoubleValue() < 0 || v.As<Napi::Number>().DoubleValue() >= double(limit))
        fail(key, "indices below " + std::to_string(limit));
      out.push_back(v.As<Napi::Number>().Int32Value());
    }
    return out;
  }
  [[noreturn]] void fail(const std::string& key, const std::string& expected) const {
    throwInvalid(obj_.Env(), "program." + where_ + key + ": expected " + expected);
  }

 private:
  Napi::Object obj_;
  std::string where_;
};

kernels::Fill fillFromJs(const Reader& r) {
  kernels::Fill f;
  std::string kind = r.string("kind");
  using K = kernels::Fill::Kind;
  if (kind == "normal") f.kind = K::Normal;
  else if (kind == "uniform") f.kind = K::Uniform;
  else if (kind == "integers") f.kind = K::Integers;
  else if (kind == "constant") f.kind = K::Constant;
  else if (kind == "rank") f.kind = K::Rank;
  else r.fail("kind", "normal, uniform, integers, constant or rank");
  f.seed = uint64_t(r.integer("seed", 0, 0, int64_t(1) << 53));
  f.a = r.number("a", 0);
  f.b = r.number("b", 0);
  return f;
}

// Range checks only; whether the tensor's count suits the layout is makeQuantizedAllreduce's to say.
QuantizedSpec quantizedFromJs(const Reader& r, int W) {
  QuantizedSpec q;
  q.bits = int(r.integer("bits", 8, 4, 8));
  q.gatherBits = int(r.integer("gatherBits", q.bits, 4, 8));
  if ((q.bits != 4 && q.bits != 8) || (q.gatherBits != 4 && q.gatherBits != 8)) r.fail("bits", "4 or 8 (and gatherBits too)");
  q.groupSize = size_t(r.integer("groupSize", 2048, 2, int64_t(1) << 30));
  if (q.groupSize % 2 != 0) r.fail("groupSize", "an even number");
  q.localSize = int(r.integer("localSize", 1, 1, W));
  if (W % q.localSize != 0) r.fail("localSize", "a divisor of the world size " + std::to_string(W));
  q.errorFeedback = r.boolean("errorFeedback");
  q.beta = float(r.number("beta", 1));
  if (!(q.beta >= 0 && q.beta <= 1)) r.fail("beta", "a number in [0, 1]");
  return q;
}

}  // namespace

Program programFromJs(const Napi::Object& obj, int W) {
  Reader top(obj, "");
  Program p;
  p.warmup = int(top.integer("warmup", 0, 0, 1 << 30));
  p.iterations = int(top.integer("iterations", 1, 0, 1 << 30));
  p.check = top.boolean("check");
  p.timeoutSec = top.number("timeoutSec", 300);
  Napi::Array tensors = top.array("tensors");
  for (uint32_t i = 0; i < tensors.Length(); ++i) {
    std::string where = "tensors[" + std::to_string(i) + "].";
    if (!tensors.Get(i).IsObject()) top.fail(where, "an object");
    Reader r(tensors.Get(i).As<Napi::Object>(), where);
    TensorSpec t;
    t.name = r.string("name");
    if (!parseDType(r.string("dtype"), t.dtype)) r.fail("dtype", "a dtype name");
    t.count = size_t(r.integer("count", 0, 0, int64_t(1) << 40));
    t.fill = fillFromJs(Reader(r.object("fill"), where + "fill."));
    p.tensors.push_back(std::move(t));
  }
  Napi::Array ops = top.array("ops");
  for (uint32_t i = 0; i < ops.Length(); ++i) {
    std::string where = "ops[" + std::to_string(i) + "].";
    if (!ops.Get(i).IsObject()) top.fail(where, "an object");
    Reader r(ops.Get(i).As<Napi::Object>(), where);
    OpSpec s;
    s.stage = r.string("stage");
    if (!parseOpKind(r.string("kind"), s.kind)) r.fail("kind", "an op name");
    s.inputs = r.indices("inputs", p.tensors.size());
    bool needsInput = s.kind != OpKind::Barrier && s.kind != OpKind::Compute;
    if (needsInput && s.inputs.empty()) r.fail("inputs", "at least one tensor");
    s.coalesced = r.boolean("coalesced");
    if (!s.coalesced && s.inputs.size() > 1) r.fail("inputs", "one tensor unless coalesced");
    for (int t : s.inputs) {
      if (p.tensors[size_t(t)].dtype != p.tensors[size_t(s.inputs[0])].dtype) r.fail("inputs", "tensors of one dtype");
    }
    std::string redop = r.string("op", "sum");
    if (redop == "sum") s.reduction.op = RedOp::Sum;
    else if (redop == "max") s.reduction.op = RedOp::Max;
    else if (redop == "min") s.reduction.op = RedOp::Min;
    else r.fail("op", "sum, max or min");
    s.reduction.mean = r.boolean("mean");
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
    if (!parseAlgo(algo, s.algo)) r.fail("algorithm", "auto, ring, tree, direct or dissemination");
    s.shift = int(r.integer("shift", 1, -(1 << 30), 1 << 30));
    s.computeUs = r.number("computeUs", 0);
    s.nonblocking = r.boolean("nonblocking");
    s.waitFor = r.indices("waitFor", i);
    for (int w : s.waitFor) if (!p.ops[size_t(w)].nonblocking) r.fail("waitFor", "indices of nonblocking ops");
    s.timeoutSec = r.number("timeoutSec", p.timeoutSec);
    p.ops.push_back(std::move(s));
  }
  return p;
}

}  // namespace spmd::addon
