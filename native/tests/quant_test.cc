// The quantization kernels (kernels/cpu/quant.h) against a plain one-value-at-a-time reference written from
// DESIGN.md: the stored format (steps, then int8 bytes or int4 nibbles with value 2k high), round-half-even
// ties, the clamp at +absmax, an all-zero group's step of 1, groups that do not divide the length, error
// feedback, and the fused dequantize-sum-quantize. Exits non-zero on a failure.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/quant.h"

namespace {

using spmd::kernels::QuantFormat;
using Bytes = std::vector<uint8_t>;

int failed = 0, passed = 0;

void check(bool ok, const std::string& what) {
  ok ? ++passed : ++failed;
  if (!ok && failed <= 20) std::printf("FAIL %s\n", what.c_str());
}

std::string name(QuantFormat f, size_t n) {
  return "int" + std::to_string(f.bits) + " g=" + std::to_string(f.groupSize) + " n=" + std::to_string(n);
}

// ------------------------------------------------------------------------------------------ the reference

float refStep(const Bytes& b, size_t k) {
  float s;
  std::memcpy(&s, b.data() + 4 * k, 4);
  return s;
}

// Value i's code, read from the stored format directly.
int refCode(QuantFormat f, const Bytes& b, size_t n, size_t i) {
  const uint8_t* codes = b.data() + 4 * f.groups(n);
  if (f.bits == 8) return int8_t(codes[i]);
  const int nibble = i % 2 == 0 ? codes[i / 2] >> 4 : codes[i / 2] & 0x0f;
  return nibble >= 8 ? nibble - 16 : nibble;
}

struct Quantized {
  std::vector<float> steps;
  std::vector<int> codes;
  std::vector<float> error;  // y - x̂
};

// The design's rule, one value at a time; nearbyint rounds half to even in the default rounding mode.
Quantized refQuantize(QuantFormat f, const std::vector<float>& y) {
  Quantized r;
  const size_t n = y.size();
  const float half = float(1 << (f.bits - 1));
  for (size_t k = 0; k < f.groups(n); ++k) {
    const size_t at = k * f.groupSize, end = std::min(n, at + f.groupSize);
    float absmax = 0;
    for (size_t i = at; i < end; ++i) absmax = std::max(absmax, std::fabs(y[i]));
    const float step = absmax == 0 ? 1.0f : absmax / half;
    r.steps.push_back(step);
    for (size_t i = at; i < end; ++i) {
      const float q = std::fmin(std::fmax(std::nearbyint(y[i] / step), -half), half - 1);
      r.codes.push_back(int(q));
      r.error.push_back(y[i] - q * step);
    }
  }
  return r;
}

// Both signs, zeros, ties and values that are not small integers.
std::vector<float> values(size_t n, int seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i % 7 == 3 ? 0.0f : float(std::sin(double(i) * 1.3 + seed) * (1 + i % 5));
  return v;
}

// ------------------------------------------------------------------------------------------------ the tests

void testQuantize(QuantFormat f, size_t n) {
  const std::vector<float> x = values(n, int(n));
  Bytes out(f.bytes(n) + 1, 0xEE);  // one guard byte
  check(quantize(f, x.data(), nullptr, 1.0f, n, out.data()), name(f, n) + ": finite input reported finite");
  const Quantized want = refQuantize(f, x);
  bool steps = true, codes = true;
  for (size_t k = 0; k < f.groups(n); ++k) steps &= refStep(out, k) == want.steps[k];
  for (size_t i = 0; i < n; ++i) codes &= refCode(f, out, n, i) == want.codes[i];
  check(steps, name(f, n) + ": steps");
  check(codes, name(f, n) + ": codes");
  check(out.back() == 0xEE, name(f, n) + ": writes f.bytes(n) bytes, no more");

  std::vector<float> back(n);
  dequantize(f, out.data(), n, back.data());
  bool values = true;
  for (size_t i = 0; i < n; ++i) values &= back[i] == float(want.codes[i]) * want.steps[i / f.groupSize];
  check(values, name(f, n) + ": dequantize");
}

// With error feedback the values quantized are x + beta·error, and the error becomes what they lost.
void testFeedback(QuantFormat f, size_t n) {
  const std::vector<float> x = values(n, 3);
  std::vector<float> error = values(n, 4), y(n);
  const float beta = 0.75f;
  for (size_t i = 0; i < n; ++i) y[i] = x[i] + beta * error[i];
  Bytes out(f.bytes(n));
  quantize(f, x.data(), error.data(), beta, n, out.data());
  const Quantized want = refQuantize(f, y);
  bool codes = true, errors = true;
  for (size_t i = 0; i < n; ++i) {
    codes &= refCode(f, out, n, i) == want.codes[i];
    errors &= error[i] == want.error[i];
  }
  check(codes && errors, name(f, n) + ": error feedback");
}

// Ties go to the even neighbour, +absmax clamps to 2^(b-1) - 1, and the format packs as documented.
void testKnownGroups() {
  // int8, absmax 128 so the step is exactly 1 and y/step is y.
  const std::vector<float> y8 = {128, 2.5f, -2.5f, 3.5f, -3.5f, 0.5f, -0.5f, 1.5f, 127.5f, -128};
  const int want8[] = {127, 2, -2, 4, -4, 0, 0, 2, 127, -128};
  QuantFormat f8{8, 10};
  Bytes b8(f8.bytes(10));
  quantize(f8, y8.data(), nullptr, 1, 10, b8.data());
  bool ok = refStep(b8, 0) == 1.0f;
  for (size_t i = 0; i < 10; ++i) ok &= int8_t(b8[4 + i]) == want8[i];
  check(ok, "int8 ties to even, clamp at +absmax");

  // int4, absmax 8 (step 1): codes 7 2 | -2 4 | -8 0 | -8 2, high nibble first.
  const std::vector<float> y4 = {8, 2.5f, -2.5f, 3.5f, -7.5f, 0.5f, -8, 1.5f};
  QuantFormat f4{4, 8};
  Bytes b4(f4.bytes(8));
  quantize(f4, y4.data(), nullptr, 1, 8, b4.data());
  const uint8_t want4[] = {0x72, 0xE4, 0x80, 0x82};
  check(refStep(b4, 0) == 1.0f && std::memcmp(b4.data() + 4, want4, 4) == 0, "int4 nibble order, ties, clamp");

  // A group of zeros has step 1 and codes 0; the next group is unaffected.
  std::vector<float> z(12, 0.0f);
  for (size_t i = 6; i < 12; ++i) z[i] = float(i);
  QuantFormat fz{8, 6};
  Bytes bz(fz.bytes(12));
  quantize(fz, z.data(), nullptr, 1, 12, bz.data());
  bool zeros = refStep(bz, 0) == 1.0f && refStep(bz, 1) == 11.0f / 128;
  for (size_t i = 0; i < 6; ++i) zeros &= bz[8 + i] == 0;
  check(zeros, "an all-zero group: step 1, codes 0");
}

void testNonFinite() {
  QuantFormat f{8, 4};
  for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    std::vector<float> x = values(10, 1);
    x[9] = bad;
    Bytes out(f.bytes(10));
    check(!quantize(f, x.data(), nullptr, 1, 10, out.data()), "a non-finite value is reported: " + std::to_string(bad));
  }
}

// Sources added in order, rounding after each addition; the fused kernel equals sum-then-quantize.
void testSums(QuantFormat f, size_t n, int count) {
  const std::string what = name(f, n) + " sources=" + std::to_string(count);
  std::vector<Bytes> blocks;
  std::vector<const uint8_t*> in;
  for (int c = 0; c < count; ++c) {
    const std::vector<float> x = values(n, 10 + c);
    blocks.emplace_back(f.bytes(n));
    quantize(f, x.data(), nullptr, 1, n, blocks.back().data());
  }
  for (const Bytes& b : blocks) in.push_back(b.data());
  std::vector<float> want(n, 0.0f), got(n), one(n);
  for (int c = 0; c < count; ++c) {
    dequantize(f, in[size_t(c)], n, one.data());
    for (size_t i = 0; i < n; ++i) want[i] = c == 0 ? one[i] : want[i] + one[i];
  }
  dequantizeSum(f, in.data(), count, n, got.data());
  check(got == want, what + ": dequantizeSum");

  std::vector<float> errorA = values(n, 7), errorB = errorA, scratch(std::min(n, f.groupSize));
  Bytes fused(f.bytes(n)), separate(f.bytes(n));
  check(dequantizeSumQuantize(f, in.data(), count, errorA.data(), 0.5f, n, scratch.data(), fused.data()), what + ": finite");
  quantize(f, want.data(), errorB.data(), 0.5f, n, separate.data());
  check(fused == separate && errorA == errorB, what + ": fused dequantize-sum-quantize with feedback");
  dequantizeSumQuantize(f, in.data(), count, nullptr, 1, n, scratch.data(), fused.data());
  quantize(f, want.data(), nullptr, 1, n, separate.data());
  check(fused == separate, what + ": fused dequantize-sum-quantize");
}

}  // namespace

int main() {
  testKnownGroups();
  testNonFinite();
  for (int bits : {8, 4}) {
    // Group sizes dividing the length, not dividing it, larger than it, and beyond one 1024-value tile.
    for (size_t g : {2, 6, 64, 2048, 3000}) {
      QuantFormat f{bits, g};
      for (size_t n : {0, 2, 6, 64, 1000, 2048, 5002}) {
        testQuantize(f, n);
        testFeedback(f, n);
        for (int count : {1, 2, 5}) testSums(f, n, count);
      }
      if (bits == 8) testQuantize(f, 7);  // int8 takes odd lengths
    }
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
