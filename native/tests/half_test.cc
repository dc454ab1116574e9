// float16 conversions (base/half_bits.h, which the CPU and the CUDA kernels share) against a reference in
// double arithmetic: every half widened, and every rounding decision of narrowing, that is each half's
// value, each midpoint between neighbours (a tie, to even) and the floats either side of it, both signs.
// Floats in [2^-25, 2^-14), the halves' subnormal range, once all converted wrongly (a shift 14 too far).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>

#include "base/half_bits.h"

namespace {

using namespace spmd::kernels;

int failed = 0;

float asFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint32_t bitsOf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// A finite half's value: subnormals count units of 2^-24, normals carry an implicit 1 before 10 bits.
double halfValue(uint16_t h) {
  const int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  const double magnitude = exp == 0 ? std::ldexp(man, -24) : std::ldexp(1024 + man, exp - 25);
  return (h & 0x8000) ? -magnitude : magnitude;
}

// The half nearest a finite float, ties to even: its exponent e (at least -14, the subnormals'), then the
// count m of units 2^(e-10) rounded by the FPU; (e + 14)·1024 + m is then the half's bits, a carry into the
// next exponent included. From 65520 (halfway past the largest half, 65504) it is infinity.
uint16_t referenceHalf(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(double(f));
  if (a >= 65520) return sign | 0x7c00;
  const int e = a == 0 ? -14 : std::max(std::ilogb(a), -14);
  const double m = std::nearbyint(std::ldexp(a, 10 - e));
  return sign | uint16_t((e + 14) * 1024 + int(m));
}

void expect(bool ok, const char* what, uint32_t input, uint32_t got, uint32_t want) {
  if (ok) return;
  if (++failed <= 10) std::printf("FAIL %s 0x%08x: 0x%x, expected 0x%x\n", what, input, got, want);
}

void narrow(float f) {
  const uint16_t got = floatBitsToHalf(bitsOf(f)), want = referenceHalf(f);
  expect(got == want, "floatBitsToHalf", bitsOf(f), got, want);
}

}  // namespace

int main() {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const bool nan = (h & 0x7fff) > 0x7c00, inf = (h & 0x7fff) == 0x7c00;
    const uint32_t got = halfToFloatBits(uint16_t(h));
    if (nan) {
      expect(std::isnan(asFloat(got)) && (got >> 31) == (h >> 15), "halfToFloatBits (NaN)", h, got, 0x7fc00000);
      continue;
    }
    const float want = inf ? std::copysign(INFINITY, (h & 0x8000) ? -1.0f : 1.0f) : float(halfValue(uint16_t(h)));
    expect(got == bitsOf(want), "halfToFloatBits", h, got, bitsOf(want));
    if (inf || (h & 0x7fff) == 0x7bff) continue;  // no finite neighbour above
    const float here = float(halfValue(uint16_t(h))), next = float(halfValue(uint16_t(h + 1)));
    const float mid = float((double(here) + double(next)) / 2);  // 12 significant bits: exact in a float
    for (float f : {here, mid, std::nextafter(mid, -INFINITY), std::nextafter(mid, INFINITY)}) narrow(f);
  }
  for (float f : {65504.0f, 65519.99f, 65520.0f, 1e-8f, 3e38f, INFINITY, -INFINITY}) narrow(f);
  const uint16_t nanHalf = floatBitsToHalf(0x7fc00000u);
  expect(nanHalf == 0x7e00, "floatBitsToHalf (NaN)", 0x7fc00000u, nanHalf, 0x7e00);
  std::printf("half_test: %s\n", failed ? "FAILED" : "ok");
  return failed ? 1 : 0;
}
