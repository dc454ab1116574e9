// Prints one line per CPU kernel (and per reducing algorithm): its name and a 64-bit FNV-1a hash of its
// outputs over fixed inputs. Run natively and under qemu-aarch64 (test/aarch64.test.js), the two listings
// must be identical: every kernel gives the same bits on x86-64 and aarch64.
//
// Inputs are uniform and integer fills, pure integer and IEEE arithmetic (no libm), so they are the same
// on every architecture; the hashes cover the outputs only.
#include <cstdint>
#include <cstdio>
#include <cmath>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "algorithms/collectives.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/fill.h"
#include "kernels/cpu/onebit.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/reduce.h"
#include "thread_transport_double.h"

using namespace spmd;
using kernels::Fill;

namespace {

// Odd lengths and a few million bytes: vector bodies, tails and several cache tiles all run.
constexpr size_t kN = (1 << 18) + 24;  // a multiple of 8 (1-bit packing) and even (int4)

class Digest {
 public:
  Digest& add(const void* data, size_t bytes) {
    for (size_t i = 0; i < bytes; ++i) h_ = (h_ ^ static_cast<const uint8_t*>(data)[i]) * 0x100000001b3ull;
    return *this;
  }
  template <class T>
  Digest& add(const std::vector<T>& v) { return add(v.data(), v.size() * sizeof(T)); }
  template <class T>
  Digest& value(T v) { return add(&v, sizeof v); }
  void print(const char* name) const { std::printf("%-28s %016llx\n", name, static_cast<unsigned long long>(h_)); }

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;
};

template <class T>
constexpr DType dtypeOf() {
  if constexpr (std::is_same_v<T, float>) return DType::F32;
  else if constexpr (std::is_same_v<T, double>) return DType::F64;
  else if constexpr (std::is_same_v<T, int32_t>) return DType::I32;
  else return DType::I64;
}

template <class T>
std::vector<T> uniform(int rank, double lo = -3, double hi = 3, size_t n = kN) {
  std::vector<T> v(n);
  kernels::fillBuffer(Fill{Fill::Kind::Uniform, 7, lo, hi}, dtypeOf<T>(), rank, v.data(), n);
  return v;
}

template <class T>
void onebit(const char* name) {
  std::vector<T> x = uniform<T>(0), acc = uniform<T>(1, -1, 1);
  std::vector<uint8_t> packed(kN / 8), packed2(kN / 8);
  const T scale = T(std::sqrt(kernels::sumSquares(x.data(), kN) / double(kN)));
  kernels::packSignsKeepError(x.data(), kN, scale, packed.data());
  std::vector<T> y = uniform<T>(2);
  kernels::packSignsKeepError(y.data(), kN, T(0.75), packed2.data());
  std::vector<T> out(kN);
  kernels::unpackScaled(packed.data(), kN - 3, scale, out.data());
  const uint8_t* sources[] = {packed.data(), packed2.data()};
  const T scales[] = {scale, T(0.75)};
  const double sq = kernels::accumulateSigns(sources, scales, 2, acc.data(), kN, 0.0);
  const double sq2 = kernels::addAndSumSquares(y.data(), x.data(), kN);
  // The host's fused passes: the worker's, then the server's with settling and signs.
  kernels::SquareSums sums;
  kernels::settleAddPackSigns(acc.data(), y.data(), kN - 5, kN, T(0.5), packed2.data(), sums);
  const double sq3 = kernels::accumulateSigns(sources, scales, 2, y.data(), kN, 0.0, T(0.25), packed.data());
  Digest().add(x).add(packed).add(packed2).add(out).add(acc).add(y).value(sq).value(sq2).value(scale).value(sums.total()).value(sq3).print(name);
}

void quant(int bits, const char* name) {
  const kernels::QuantFormat f{bits, 2048};
  const size_t n = kN - 1000;  // a short last group
  std::vector<float> x = uniform<float>(0, -3, 3, n), error = uniform<float>(3, -0.01, 0.01, n);
  x[5] = 0;
  std::fill(x.begin() + 4096, x.begin() + 6144, 0.0f);  // a group of zeros: step 1
  std::vector<uint8_t> a(f.bytes(n)), b(f.bytes(n)), fused(f.bytes(n));
  kernels::quantize(f, x.data(), error.data(), 0.5f, n, a.data());
  std::vector<float> y = uniform<float>(1, -5, 5, n);
  kernels::quantize(f, y.data(), nullptr, 0, n, b.data());
  std::vector<float> back(n), sum(n), scratch(f.groupSize);
  kernels::dequantize(f, a.data(), n, back.data());
  const uint8_t* in[] = {a.data(), b.data()};
  kernels::dequantizeSum(f, in, 2, n, sum.data());
  kernels::dequantizeSumQuantize(f, in, 2, error.data(), 1.0f, n, scratch.data(), fused.data());
  Digest().add(a).add(b).add(back).add(sum).add(fused).add(error).print(name);
}

template <class T>
void reduce(const char* name) {
  for (auto [op, opName] : {std::pair{RedOp::Sum, "sum"}, {RedOp::Max, "max"}, {RedOp::Min, "min"}}) {
    std::vector<T> dst = uniform<T>(0, -1000, 1000), src = uniform<T>(1, -1000, 1000), three(kN);
    kernels::reduceInto(dtypeOf<T>(), op, dst.data(), src.data(), kN);
    kernels::reduce3(dtypeOf<T>(), op, three.data(), dst.data(), src.data(), kN);
    Digest().add(dst).add(three).print((std::string(name) + "/" + opName).c_str());
  }
}

void conversions() {
  std::vector<double> d = uniform<double>(0, -70000, 70000);  // past float16's range: infinities too
  for (DType dt : {DType::F16, DType::BF16}) {
    std::vector<float> f(kN), wide(kN);
    kernels::toF32(DType::F64, d.data(), f.data(), kN);
    std::vector<uint16_t> half(kN);
    kernels::narrowFromF32(dt, f.data(), half.data(), kN);
    kernels::widenToF32(dt, half.data(), wide.data(), kN);
    std::vector<double> back(kN);
    kernels::fromF32(DType::F64, wide.data(), back.data(), kN);
    Digest().add(f).add(half).add(wide).add(back).print(dt == DType::F16 ? "convert/float16" : "convert/bfloat16");
  }
  std::vector<float> f = uniform<float>(1);
  kernels::divideInPlace(DType::F32, f.data(), kN, 3.0);
  kernels::divideInPlace(DType::F64, d.data(), kN, 7.0);
  Digest().add(f).add(d).print("convert/divide");
}

// The float sums of the reducing algorithms depend on their order of additions: 4 ranks on threads.
template <class Algorithm>
void allreduce(Algorithm algorithm, const char* name) {
  constexpr int W = 4;
  constexpr size_t n = 100003;
  std::vector<std::vector<float>> out(W, std::vector<float>(n));
  auto failures = testing::runRanksOnThreads(W, 1 << 16, [&](Transport& t) {
    Workspace ws;
    std::vector<float> in = uniform<float>(t.rank(), -3, 3, n);
    algorithm(t, ws, in.data(), out[size_t(t.rank())].data(), n, DType::F32, RedOp::Sum);
  });
  Digest d;
  for (auto& o : out) d.add(o);
  for (auto& f : failures) d.add(f.data(), f.size());
  d.print(name);
}

}  // namespace

int main() {
  onebit<float>("onebit/float32");
  onebit<double>("onebit/float64");
  quant(8, "quant/int8");
  quant(4, "quant/int4");
  reduce<float>("reduce/float32");
  reduce<double>("reduce/float64");
  reduce<int32_t>("reduce/int32");
  reduce<int64_t>("reduce/int64");
  conversions();
  // Through lambdas, so that the ring's default slice size applies.
  allreduce([](auto&&... a) { algo::allreduceRing(std::forward<decltype(a)>(a)...); }, "allreduce/ring");
  allreduce([](auto&&... a) { algo::allreduceTree(std::forward<decltype(a)>(a)...); }, "allreduce/tree");
  allreduce([](auto&&... a) { algo::allreduceDirect(std::forward<decltype(a)>(a)...); }, "allreduce/direct");
  return 0;
}
