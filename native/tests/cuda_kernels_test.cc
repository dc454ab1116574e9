// The CUDA kernels (kernels/cuda, launched by backends/library/cuda_kernels.cc) against the CPU kernels they
// stand in for (kernels/cpu/cpu_kernels.h), on CUDA device 0: packed signs, records, codes, steps, error
// feedback, sums and conversions bit for bit (a NaN from arithmetic: any NaN), scales (sums of squares added
// in another order) within the bound of that order. Then each kernel's speed at 256 MiB against a device-to-device
// copy of 256 MiB: every kernel must reach 80% of the copy's bandwidth (bytes read plus written per second), and
// the table is printed whether it does or not. Built when nvcc is found;
// skipped (77), saying why, where there is no GPU, driver or CUDA runtime. Exits non-zero on a failure.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/library/device.h"
#include "base/error.h"
#include "kernels/cpu/cpu_kernels.h"

namespace {

using namespace spmd;
using kernels::QuantFormat;
using kernels::Strided;
using Bytes = std::vector<uint8_t>;

int failed = 0, passed = 0;

void check(bool ok, const std::string& what) {
  ok ? ++passed : ++failed;
  if (!ok) std::printf("FAIL %s\n", what.c_str());
}

kernels::DeviceKernels& cpu = kernels::cpuKernels();

// Host vectors and their copies on the GPU.
class Gpu {
 public:
  Gpu(library::Device& d, kernels::DeviceKernels& k) : d_(d), k_(k) {}
  kernels::DeviceKernels& k() { return k_; }
  library::Device& device() { return d_; }

  template <class T>
  T* put(const std::vector<T>& v) {
    buffers_.emplace_back(d_, std::max<size_t>(1, v.size() * sizeof(T)));
    d_.upload(buffers_.back().get(), v.data(), v.size() * sizeof(T));
    return buffers_.back().template as<T>();
  }
  template <class T>
  std::vector<T> get(const T* p, size_t n) {
    std::vector<T> v(n);
    d_.download(v.data(), p, n * sizeof(T));
    return v;
  }
  void clear() { buffers_.clear(); }

 private:
  library::Device& d_;
  kernels::DeviceKernels& k_;
  std::vector<Buffer> buffers_;
};

// An element's bits, for saying which differ.
template <class T>
unsigned long long bitsOf(const T& v) {
  unsigned long long b = 0;
  std::memcpy(&b, &v, sizeof v);
  return b;
}

// Whether a and b are both NaN. Arithmetic on a NaN returns the hardware's NaN: x86 keeps the operand's
// (0x7fc00000 here), CUDA returns 0x7fffffff; which NaN it is means nothing.
template <class T>
bool bothNaN(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(a) && std::isnan(b);
  return false;
}

// The GPU's result (`got`) holds the CPU's (`want`) bit for bit (`anyNaN`: but for which NaN); else says
// where it first differs and how often.
template <class T>
bool sameBits(const std::vector<T>& got, const std::vector<T>& want, bool anyNaN = false) {
  if (got.size() != want.size()) {
    std::printf("  %zu elements, expected %zu\n", got.size(), want.size());
    return false;
  }
  size_t first = got.size(), count = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (bitsOf(got[i]) != bitsOf(want[i]) && !(anyNaN && bothNaN(got[i], want[i]))) count++, first = std::min(first, i);
  }
  if (count) {
    std::printf("  %zu of %zu elements differ; the first at %zu: 0x%llx, expected 0x%llx\n", count, got.size(), first,
                bitsOf(got[first]), bitsOf(want[first]));
  }
  return count == 0;
}

// A scale is the root of a sum of `terms` squares, added in double in another order on each side. Each sum
// lies within (terms - 1)·2^-53 of the exact one, relative to it, so two scales may differ by that much
// (a float's rounding hides it: then one ulp, from the final rounding to T).
template <class T>
bool sameScale(T got, T want, size_t terms) {
  const double slack = double(terms) * std::ldexp(1.0, -53) * std::fabs(double(want));
  if (got == want || std::nextafter(got, want) == want || std::fabs(double(got) - double(want)) <= slack) return true;
  std::printf("  %.17g, expected %.17g\n", double(got), double(want));
  return false;
}

template <class T>
std::vector<T> normals(size_t n, unsigned seed, double scale = 1) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(0, scale);
  std::vector<T> v(n);
  for (T& x : v) x = T(d(rng));
  return v;
}

// ------------------------------------------------------------------------------------------ correctness

template <class T>
void oneBit(Gpu& g, const char* type) {
  const int count = 5;
  const size_t chunk = 1000;  // a multiple of 8, not of 32: warps straddle records
  const size_t len = count * chunk, n = len - 13, recordBytes = chunk / 8 + sizeof(T);
  const std::string at = std::string(type) + " ";

  // addAndScale, with and without y, and a non-finite value.
  for (bool add : {true, false}) {
    std::vector<T> x = normals<T>(len, 1), y = normals<T>(n, 2);
    T* dx = g.put(x);
    T* dy = add ? g.put(y) : nullptr;
    T* ds = g.put(std::vector<T>(1));
    uint32_t* df = g.put(std::vector<uint32_t>(1));
    T s = 0;
    uint32_t f = 0;
    g.k().addAndScale(dx, dy, n, len, ds, df);
    cpu.addAndScale(x.data(), add ? y.data() : nullptr, n, len, &s, &f);
    check(sameBits(g.get(dx, len), x), at + "addAndScale x");
    check(sameScale(g.get(ds, 1)[0], s, len), at + "addAndScale scale");
    check(g.get(df, 1)[0] == 0 && f == 0, at + "addAndScale: finite");
  }
  {
    std::vector<T> x = normals<T>(len, 3);
    x[77] = std::numeric_limits<T>::infinity();
    T* dx = g.put(x);
    T* ds = g.put(std::vector<T>(1));
    uint32_t* df = g.put(std::vector<uint32_t>(1));
    g.k().addAndScale(dx, nullptr, len, len, ds, df);
    check(g.get(df, 1)[0] == 1, at + "addAndScale flags an infinite value");
  }

  // packRecords from the same scale, then accumulateRecords and unpackRecords over those records.
  std::vector<T> x = normals<T>(len, 4);
  x[0] = 0;
  x[1] = -T(0);
  const T scale = T(0.75);
  T* dx = g.put(x);
  T* dscale = g.put(std::vector<T>{scale});
  Bytes records(count * recordBytes, 0xee);
  uint8_t* drecords = g.put(records);
  g.k().packRecords(dx, chunk, count, dscale, drecords, recordBytes);
  cpu.packRecords(x.data(), chunk, count, &scale, records.data(), recordBytes);
  check(sameBits(g.get(drecords, records.size()), records), at + "packRecords records");
  check(sameBits(g.get(dx, len), x), at + "packRecords error");

  std::vector<T> acc = normals<T>(chunk, 5);
  T* dacc = g.put(acc);
  T* ds = g.put(std::vector<T>(1));
  T s = 0;
  const Strided sources{records.data(), recordBytes, count}, dsources{drecords, recordBytes, count};
  g.k().accumulateRecords(dsources, T(count), dacc, chunk, ds);
  cpu.accumulateRecords(sources, T(count), acc.data(), chunk, &s);
  check(sameBits(g.get(dacc, chunk), acc), at + "accumulateRecords acc");
  check(sameScale(g.get(ds, 1)[0], s, chunk), at + "accumulateRecords scale");

  // Into an aligned output and one a value off.
  for (size_t offset : {0, 1}) {
    std::vector<T> out(n + offset);
    T* dout = g.put(out);
    g.k().unpackRecords(dsources, chunk, n, dout + offset);
    cpu.unpackRecords(sources, chunk, n, out.data() + offset);
    check(sameBits(g.get(dout, n + offset), out), at + "unpackRecords at offset " + std::to_string(offset));
  }
  g.clear();
}

// dequantizeSum, dequantize and dequantizeSumQuantize over three sources `stride` bytes apart, against the CPU.
void sums(Gpu& g, QuantFormat f, size_t n, size_t stride, bool feedback, const std::string& what) {
  Bytes sources(3 * stride);
  uint32_t nonFinite = 0;
  for (int c = 0; c < 3; ++c) {
    std::vector<float> v = normals<float>(n, 10 + unsigned(c), 2.0);
    cpu.quantize(f, v.data(), nullptr, 0, n, sources.data() + size_t(c) * stride, &nonFinite);
  }
  uint8_t* dsources = g.put(sources);
  uint32_t* df = g.put(std::vector<uint32_t>(1));
  const Strided host{sources.data(), stride, 3}, dev{dsources, stride, 3};
  std::vector<float> sum(n);
  float* dsum = g.put(sum);
  g.k().dequantizeSum(f, dev, n, dsum);
  cpu.dequantizeSum(f, host, n, sum.data());
  check(sameBits(g.get(dsum, n), sum), what + "dequantizeSum");
  g.k().dequantize(f, dsources, n, dsum);
  cpu.dequantize(f, sources.data(), n, sum.data());
  check(sameBits(g.get(dsum, n), sum), what + "dequantize");
  Bytes requantized(f.bytes(n));
  uint8_t* drequantized = g.put(requantized);
  std::vector<float> error = feedback ? normals<float>(n, 8, 0.1) : std::vector<float>();
  float* derror = feedback ? g.put(error) : nullptr;
  g.k().dequantizeSumQuantize(f, dev, derror, 1.0f, n, drequantized, df);
  cpu.dequantizeSumQuantize(f, host, feedback ? error.data() : nullptr, 1.0f, n, requantized.data(), &nonFinite);
  check(sameBits(g.get(drequantized, requantized.size()), requantized), what + "dequantizeSumQuantize");
  if (feedback) check(sameBits(g.get(derror, n), error), what + "dequantizeSumQuantize error");
  check(g.get(df, 1)[0] == 0, what + "dequantizeSumQuantize: finite");
}

void quantization(Gpu& g) {
  for (int bits : {8, 4}) {
    // 2048 and 1152 (9 tiles): whole groups from registers; 100: a value at a time.
    for (size_t groupSize : {size_t(2048), size_t(1152), size_t(100)}) {
      const QuantFormat f{bits, groupSize};
      const size_t n = 3 * groupSize + 42;
      const std::string at = "int" + std::to_string(bits) + " g=" + std::to_string(groupSize) + " ";
      std::vector<float> x = normals<float>(n, 6, 3.0);
      std::fill(x.begin(), x.begin() + long(groupSize), 0.0f);  // an all-zero group: step 1
      x[groupSize + 5] = 7.0f;                                    // +absmax: clamps to 2^(b-1) - 1
      for (bool feedback : {false, true}) {
        const std::string what = at + (feedback ? "with feedback " : "");
        std::vector<float> error = feedback ? normals<float>(n, 7, 0.1) : std::vector<float>();
        Bytes out(f.bytes(n));
        float* dx = g.put(x);
        float* derror = feedback ? g.put(error) : nullptr;
        uint8_t* dout = g.put(out);
        uint32_t* df = g.put(std::vector<uint32_t>(1));
        uint32_t nonFinite = 0;
        g.k().quantize(f, dx, derror, 0.5f, n, dout, df);
        cpu.quantize(f, x.data(), feedback ? error.data() : nullptr, 0.5f, n, out.data(), &nonFinite);
        check(sameBits(g.get(dout, out.size()), out), what + "quantize");
        if (feedback) check(sameBits(g.get(derror, n), error), what + "quantize error");
        check(g.get(df, 1)[0] == 0, what + "quantize: finite");

        // Three sources at a stride with a gap, as records sit in the all-to-all's buffers: an odd one
        // (the kernels' scalar path) and one that keeps the codes aligned (their vector path).
        for (size_t stride : {out.size() + 3, (out.size() + 15) / 16 * 16}) {
          sums(g, f, n, stride, feedback, what + "stride " + std::to_string(stride) + " ");
        }
        g.clear();
      }
      std::vector<float> bad = x;
      bad[n - 1] = std::nanf("");
      float* dbad = g.put(bad);
      uint8_t* dout = g.put(Bytes(f.bytes(n)));
      uint32_t* df = g.put(std::vector<uint32_t>(1));
      g.k().quantize(f, dbad, nullptr, 0, n, dout, df);
      check(g.get(df, 1)[0] == 1, at + "quantize flags a NaN");
      g.clear();
    }
  }
}

void conversions(Gpu& g) {
  const size_t n = 100003;
  std::vector<float> f = normals<float>(n, 9, 1e4);
  const float specials[] = {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::nanf(""), 65504.0f, 65520.0f, 1e-8f, 5.96e-8f, 3e38f, 1.0f + 0x1p-11f, 1.0f + 0x1p-8f,
                            // the edges of the range a float32 division takes by its reciprocal
                            1e-40f, -0x1p-60f, 0x1.fffffep-61f, 0x1p100f, -0x1.fffffep99f, 1.17549435e-38f};
  std::copy(std::begin(specials), std::end(specials), f.begin());
  for (DType dt : {DType::F16, DType::BF16, DType::F64}) {
    const std::string at = std::string(dtypeName(dt)) + " ";
    const size_t es = elementSize(dt);
    Bytes narrow(n * es);
    float* df = g.put(f);
    uint8_t* dnarrow = g.put(narrow);
    g.k().fromF32(dt, df, dnarrow, n);
    cpu.fromF32(dt, f.data(), narrow.data(), n);
    check(sameBits(g.get(dnarrow, narrow.size()), narrow), at + "fromF32");
    std::vector<float> wide(n);
    float* dwide = g.put(wide);
    g.k().toF32(dt, dnarrow, dwide, n);
    cpu.toF32(dt, narrow.data(), wide.data(), n);
    check(sameBits(g.get(dwide, n), wide), at + "toF32");
    g.clear();
  }
  for (DType dt : {DType::F32, DType::F64}) {
    std::vector<double> d = normals<double>(n, 12);
    std::vector<float> s(f);
    void* host = dt == DType::F64 ? static_cast<void*>(d.data()) : static_cast<void*>(s.data());
    void* dev = dt == DType::F64 ? static_cast<void*>(g.put(d)) : static_cast<void*>(g.put(s));
    // 3, 1/3 (an inexact reciprocal), and 1e30 (beyond the reciprocal's range: IEEE division throughout).
    for (double divisor : {3.0, 1.0 / 3, 1e30}) {
      g.k().divideInPlace(dt, dev, n, divisor);
      cpu.divideInPlace(dt, host, n, divisor);
      const bool same = dt == DType::F64 ? sameBits(g.get(static_cast<double*>(dev), n), d, true)
                                         : sameBits(g.get(static_cast<float*>(dev), n), s, true);
      check(same, std::string(dtypeName(dt)) + " divideInPlace by " + std::to_string(divisor));
    }
    g.clear();
  }
}

// ------------------------------------------------------------------------------------------ speed

constexpr size_t kBytes = size_t(256) << 20;
constexpr double kTarget = 0.80;
// Launches timed together, so that one launch's cost on the host does not count against a 60 us kernel.
// 256 MiB is well above the L2 cache, so every launch goes to memory.
constexpr int kLaunches = 10;

// Waits for the device by spinning on idle(). Device::synchronize sleeps up to 1 ms between polls, leaving
// the core to others: on samples of about 1 ms that read as up to a third of a kernel's bandwidth lost, and
// moved one kernel between 64% and 104% of the copy in two runs of one build (timed with CUDA events on
// the same machine: 85%, steady).
void finish(library::Device& d) {
  d.issued();
  while (!d.idle()) {
  }
}

// Seconds per run of `run`: of 5 samples of kLaunches runs back to back, after a warm-up, the best.
double seconds(library::Device& d, const std::function<void()>& run) {
  run();
  finish(d);
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kLaunches; ++i) run();
    finish(d);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / kLaunches);
  }
  return best;
}

void speed(Gpu& g) {
  library::Device& d = g.device();
  kernels::DeviceKernels& k = g.k();
  const size_t n = kBytes / sizeof(float);
  const QuantFormat int8{8, 2048};
  Buffer a(d, kBytes), b(d, kBytes), bits(d, n / 8 + 64), codes(d, int8.bytes(n) * 2), out(d, int8.bytes(n)), scale(d, 64);
  // Values as a gradient holds them, not zeros: a division's slow path takes zeros, and the kernels should be
  // timed on the path real data takes.
  const std::vector<float> tile = normals<float>(size_t(1) << 20, 21);
  for (size_t at = 0; at < kBytes; at += tile.size() * sizeof(float)) {
    d.upload(a.as<char>() + at, tile.data(), tile.size() * sizeof(float));
    d.upload(b.as<char>() + at, tile.data(), tile.size() * sizeof(float));
  }
  d.zero(codes.get(), codes.bytes());
  d.zero(scale.get(), scale.bytes());
  auto* x = a.as<float>();
  auto* y = b.as<float>();
  auto* s = scale.as<float>();
  auto* flag = reinterpret_cast<uint32_t*>(scale.as<char>() + 32);
  const double copyBw = 2.0 * kBytes / seconds(d, [&] { d.copy(y, x, kBytes); });
  std::printf("cuda_kernels_test: device-to-device copy of 256 MiB: %.1f GB/s (read + written)\n", copyBw / 1e9);

  // What each kernel reads plus writes at n = 64 Mi floats.
  struct Case {
    const char* name;
    double bytes;
    std::function<void()> run;
  };
  const double f = double(kBytes), packed = double(n) / 8, q8 = double(int8.bytes(n));
  const Strided record{bits.as<uint8_t>(), n / 8 + sizeof(float), 1};
  const Strided two{codes.as<uint8_t>(), int8.bytes(n), 2};
  const std::vector<Case> cases{
      {"addAndScale (x += y, scale)", 3 * f, [&] { k.addAndScale(x, y, n, n, s, flag); }},
      {"packRecords (signs, error kept)", 2 * f + packed, [&] { k.packRecords(x, n, 1, s, bits.as<uint8_t>(), n / 8 + 4); }},
      {"unpackRecords", f + packed, [&] { k.unpackRecords(record, n, n, y); }},
      {"accumulateRecords (1 source)", 2 * f + packed, [&] { k.accumulateRecords(record, 1.0f, x, n, s); }},
      {"quantize int8 g=2048", f + q8, [&] { k.quantize(int8, x, nullptr, 0, n, codes.as<uint8_t>(), flag); }},
      {"quantize int8 g=2048, feedback", 3 * f + q8, [&] { k.quantize(int8, x, y, 1, n, codes.as<uint8_t>(), flag); }},
      {"dequantize int8", q8 + f, [&] { k.dequantize(int8, codes.as<uint8_t>(), n, y); }},
      {"dequantizeSum int8, 2 sources", 2 * q8 + f, [&] { k.dequantizeSum(int8, two, n, y); }},
      {"dequantizeSumQuantize int8, 2 sources", 3 * q8, [&] { k.dequantizeSumQuantize(int8, two, nullptr, 0, n, out.as<uint8_t>(), flag); }},
      {"fromF32 bfloat16", 1.5 * f, [&] { k.fromF32(DType::BF16, x, y, n); }},
      {"toF32 bfloat16", 1.5 * f, [&] { k.toF32(DType::BF16, y, x, n); }},
      // By 3 and by 1/3 in turn, so the values stay where they started over the runs.
      {"divideInPlace float32", 2 * f, [&, by3 = false]() mutable { k.divideInPlace(DType::F32, x, n, (by3 = !by3) ? 3.0 : 1.0 / 3); }},
  };
  for (const Case& c : cases) {
    const double bw = c.bytes / seconds(d, c.run), ratio = bw / copyBw;
    std::printf("  %-40s %7.1f GB/s  %5.1f%% of copy%s\n", c.name, bw / 1e9, 100 * ratio, ratio >= kTarget ? "" : "  BELOW 80%");
    check(ratio >= kTarget, std::string(c.name) + " reaches 80% of the copy's bandwidth");
  }
}

}  // namespace

int main() {
  std::unique_ptr<library::Device> device;
  kernels::DeviceKernels* k = nullptr;
  try {
    device = library::makeCudaDevice(0);
    k = &device->kernels();
  } catch (const CommError& e) {
    std::printf("cuda_kernels_test: skipped, no GPU to run on: %s\n", e.what());
    return 77;
  }
  try {
    Gpu g(*device, *k);
    oneBit<float>(g, "float");
    oneBit<double>(g, "double");
    quantization(g);
    conversions(g);
    speed(g);
  } catch (const CommError& e) {
    std::printf("FAIL %s: %s\n", e.code(), e.what());
    return 1;
  }
  std::printf("cuda_kernels_test: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
