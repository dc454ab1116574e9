// The 1-bit kernels (kernels/cpu/onebit.h) against plain one-element-at-a-time references: the packed bit
// order of the wire format (element 8k+j in bit 7-j of byte k, set for v >= 0), the errors left behind,
// and the tiled accumulation across tile boundaries, for float and double. Exits non-zero on a failure.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/onebit.h"

namespace {

using namespace spmd::kernels;

int failed = 0, passed = 0;

void check(bool ok, const std::string& what) {
  ok ? ++passed : ++failed;
  if (!ok && failed <= 20) std::printf("FAIL %s\n", what.c_str());
}

// Both signs, exact zeros (which count as +1) and values that are not small integers.
template <class T>
std::vector<T> values(size_t n) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i % 5 == 0 ? T(0) : T(std::sin(double(i) * 1.7) * 3);
  return v;
}

bool bitOf(const std::vector<uint8_t>& packed, size_t i) { return (packed[i / 8] >> (7 - i % 8)) & 1; }

template <class T>
void testPack(const char* type, size_t n) {
  const std::string name = std::string(type) + " n=" + std::to_string(n);
  std::vector<T> x = values<T>(n), original = x;
  std::vector<uint8_t> packed(n / 8, 0xA5);
  const T scale = T(0.625);
  packSignsKeepError(x.data(), n, scale, packed.data());
  bool bits = true, errors = true;
  for (size_t i = 0; i < n; ++i) {
    const bool positive = original[i] >= T(0);
    bits &= bitOf(packed, i) == positive;
    errors &= x[i] == T(original[i] - (positive ? scale : -scale));
  }
  check(bits, "pack bit order " + name);
  check(errors, "pack error update " + name);
  // A known byte: +, -, +(0), -, +, +, -, - is 1010 1100.
  if (n == 8) {
    std::vector<T> y = {T(1), T(-1), T(0), T(-2), T(3), T(0.5), T(-0.5), T(-4)};
    uint8_t byte = 0;
    packSignsKeepError(y.data(), 8, T(1), &byte);
    check(byte == 0xAC, name + ": byte 0xAC, got " + std::to_string(byte));
  }
}

template <class T>
void testUnpack(const char* type, size_t n) {
  const std::string name = std::string(type) + " n=" + std::to_string(n);
  std::vector<uint8_t> packed((n + 7) / 8);
  for (size_t k = 0; k < packed.size(); ++k) packed[k] = uint8_t(k * 37 + 11);
  const T scale = T(1.25);
  // The streaming form too, into an aligned output and one element off (which it unpacks the plain way).
  using Unpack = void (*)(const uint8_t*, size_t, T, T*);
  const std::pair<const char*, Unpack> forms[] = {{"unpack ", &unpackScaled<T>}, {"unpack streaming ", &unpackScaledStreaming<T>}};
  for (const auto& [form, unpack] : forms) {
    for (size_t offset : {0, 1}) {
      std::vector<T> buffer(n + 2, T(99));  // one guard element past the end
      T* out = buffer.data() + offset;
      unpack(packed.data(), n, scale, out);
      bool ok = out[n] == T(99);
      for (size_t i = 0; i < n; ++i) ok &= out[i] == (bitOf(packed, i) ? scale : -scale);
      check(ok, std::string(form) + name + " offset " + std::to_string(offset));
    }
  }
}

template <class T>
void testAccumulate(const char* type, size_t n, int count) {
  const std::string name = std::string(type) + " n=" + std::to_string(n) + " sources=" + std::to_string(count);
  std::vector<std::vector<uint8_t>> packed(size_t(count), std::vector<uint8_t>((n + 7) / 8));
  std::vector<const uint8_t*> sources;
  std::vector<T> scales;
  for (int c = 0; c < count; ++c) {
    for (size_t k = 0; k < packed[size_t(c)].size(); ++k) packed[size_t(c)][k] = uint8_t(k * 13 + size_t(c) * 101 + 7);
    sources.push_back(packed[size_t(c)].data());
    scales.push_back(T(0.1) * T(c + 1));
  }
  std::vector<T> acc = values<T>(n), want = acc;
  for (size_t i = 0; i < n; ++i)
    for (int c = 0; c < count; ++c) want[i] += bitOf(packed[size_t(c)], i) ? scales[size_t(c)] : -scales[size_t(c)];
  const double squares = accumulateSigns(sources.data(), scales.data(), count, acc.data(), n, 0.0);
  check(acc == want, "accumulate, sources in order, " + name);
  double wantSquares = 0;
  for (T v : want) wantSquares += double(v) * double(v);
  check(std::fabs(squares - wantSquares) <= 1e-12 * wantSquares, "accumulate's sum of squares " + name);
}

// The host's fused worker pass (x settled by the last scale, the input added, the new signs packed, the
// squares summed) equals packSignsKeepError and then addAndSumSquares and sumSquares over the padding, to the
// bit, whole or in pieces whose sums are carried; and the server's accumulation with settling and signs
// equals packSignsKeepError and then the plain accumulation.
template <class T>
void testSettle(const char* type, size_t n, size_t len, T carried) {
  const std::string name = std::string(type) + " n=" + std::to_string(n) + " len=" + std::to_string(len) +
                           " carried=" + std::to_string(double(carried));
  const std::vector<T> x0 = values<T>(len);
  std::vector<T> y(n);
  for (size_t i = 0; i < n; ++i) y[i] = T(std::cos(double(i) * 0.3) * 2);
  std::vector<T> want = x0;
  std::vector<uint8_t> scratch(len / 8), wantSigns(len / 8);
  packSignsKeepError(want.data(), len, carried, scratch.data());
  const double head = addAndSumSquares(want.data(), y.data(), n);
  const double wantSquares = head + sumSquares(want.data() + n, len - n);
  for (size_t i = 0; i < len; ++i) wantSigns[i / 8] = uint8_t(wantSigns[i / 8] | (want[i] >= T(0)) << (7 - i % 8));
  // Whole, then cut at multiples of 8 (one cut inside a tile, one where n ends when it is a multiple of 8).
  for (const std::vector<size_t>& cuts : {std::vector<size_t>{}, std::vector<size_t>{8, 2048 + 16, n / 8 * 8}}) {
    std::vector<T> x = x0;
    std::vector<uint8_t> signs(len / 8, 0x5A);
    SquareSums sums;
    size_t from = 0;
    std::vector<size_t> ends;
    for (size_t c : cuts) if (c > from && c < len && (ends.empty() || c > ends.back())) ends.push_back(c);
    ends.push_back(len);
    for (size_t to : ends) {
      const size_t added = from < n ? std::min(to, n) - from : 0;
      settleAddPackSigns(x.data() + from, y.data() + std::min(from, n), added, to - from, carried, signs.data() + from / 8, sums);
      from = to;
    }
    const double squares = sums.total() + sumSquares(x.data() + n, len - n);
    const std::string form = name + " in " + std::to_string(ends.size()) + " pieces";
    check(x == want, "settle+add values " + form);
    check(signs == wantSigns, "settle+add signs " + form);
    check(squares == wantSquares, "settle+add squares to the bit " + form);
  }
  // The server's side over two sources.
  std::vector<uint8_t> a(len / 8), b(len / 8);
  for (size_t k = 0; k < len / 8; ++k) a[k] = uint8_t(k * 29 + 3), b[k] = uint8_t(k * 71 + 5);
  const uint8_t* sources[] = {a.data(), b.data()};
  const T weights[] = {T(0.3), T(0.7)};
  std::vector<T> acc = x0, plain = x0;
  packSignsKeepError(plain.data(), len, carried, scratch.data());
  const double plainSquares = accumulateSigns(sources, weights, 2, plain.data(), len, 1.5);
  std::vector<uint8_t> signs(len / 8, 0x5A), plainSigns(len / 8);
  for (size_t i = 0; i < len; ++i) plainSigns[i / 8] = uint8_t(plainSigns[i / 8] | (plain[i] >= T(0)) << (7 - i % 8));
  const double squares = accumulateSigns(sources, weights, 2, acc.data(), len, 1.5, carried, signs.data());
  check(acc == plain && signs == plainSigns && squares == plainSquares, "accumulate with settling and signs " + name);
}

template <class T>
void testSums(const char* type, size_t n) {
  std::vector<T> x = values<T>(n), y = values<T>(n + 3);
  double want = 0;
  for (size_t i = 0; i < n; ++i) {
    const T v = T(x[i] + y[i + 3]);
    want += double(v) * double(v);
  }
  const double got = addAndSumSquares(x.data(), y.data() + 3, n);
  check(std::fabs(got - want) <= 1e-12 * want && std::fabs(sumSquares(x.data(), n) - want) <= 1e-12 * want,
        std::string(type) + " sums of squares n=" + std::to_string(n));
}

template <class T>
void testType(const char* type) {
  // Tiles are 2048 elements: lengths on, around and across the boundaries.
  for (size_t n : {8, 16, 2048, 2056, 4096 + 64, 10000}) testPack<T>(type, n);
  for (size_t n : {1, 7, 8, 9, 2047, 2049, 4099}) testUnpack<T>(type, n);
  for (size_t n : {1, 7, 2048, 2051, 5000})
    for (int count : {0, 1, 3, 8}) testAccumulate<T>(type, n, count);
  for (size_t n : {0, 1, 7, 8, 9, 1001}) testSums<T>(type, n);
  for (T carried : {T(0), T(0.375)}) {
    for (auto [n, len] : {std::pair<size_t, size_t>{0, 8}, {5, 8}, {2048, 2048}, {4093, 4112}, {6000, 6000}, {6001, 6048}})
      testSettle<T>(type, n, len, carried);
  }
}

}  // namespace

int main() {
  testType<float>("float");
  testType<double>("double");
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
