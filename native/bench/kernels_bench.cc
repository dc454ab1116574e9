// Throughput of the 1-bit kernels (kernels/cpu/onebit.h) against memcpy on 64 MiB of float32, the bar
// issue #5 sets: pack and unpack at >= 50% of memcpy's bandwidth. Run with `npm run bench`.
//
// Every figure is 64 MiB / best time, i.e. GB/s (1e9 B/s) of float32 data processed: for memcpy the bytes
// copied (read once, written once), for pack the floats read and rewritten (plus 1/32 as much written as
// bits), for unpack the floats written (from 1/32 as much read as bits). Best of several repetitions, after
// a warm-up run, so page faults and frequency ramps do not count.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "kernels/cpu/onebit.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kBytes = size_t(64) << 20;
constexpr size_t kCount = kBytes / sizeof(float);
constexpr int kRepeats = 10;

double bestGBps(const std::function<void()>& run) {
  run();
  double best = 1e30;
  for (int i = 0; i < kRepeats; ++i) {
    auto t0 = Clock::now();
    run();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return double(kBytes) / best / 1e9;
}

// Keeps results observable so no kernel call is optimised away.
volatile double sink;

}  // namespace

int main() {
  std::vector<float> src(kCount), dst(kCount);
  std::vector<uint8_t> packed(kCount / 8);
  for (size_t i = 0; i < kCount; ++i) src[i] = std::sin(double(i));  // both signs, no pattern per byte
  std::memcpy(dst.data(), src.data(), kBytes);
  std::memset(packed.data(), 0x5a, packed.size());
  const int kSources = 4;
  std::vector<const uint8_t*> sources(kSources, packed.data());
  const float scales[kSources] = {0.25f, -0.5f, 0.75f, 1e-3f};

  struct Row { const char* name; double gbps; };
  const double memcpyGBps = bestGBps([&] { std::memcpy(dst.data(), src.data(), kBytes); });
  const Row rows[] = {
      // The scale is tiny so x drifts by rounding only, however often the benchmark repeats.
      {"pack (sign+pack+error)", bestGBps([&] { spmd::kernels::packSignsKeepError(dst.data(), kCount, 1e-30f, packed.data()); })},
      {"unpack (scaled)", bestGBps([&] { spmd::kernels::unpackScaled(packed.data(), kCount, 0.5f, dst.data()); })},
      {"unpack-accumulate x1", bestGBps([&] { sink = spmd::kernels::accumulateSigns(sources.data(), scales, 1, dst.data(), kCount); })},
      {"unpack-accumulate x4", bestGBps([&] { sink = spmd::kernels::accumulateSigns(sources.data(), scales, kSources, dst.data(), kCount); })},
      {"l2 norm (sum sq)", bestGBps([&] { sink = spmd::kernels::sumSquares(src.data(), kCount); })},
      {"add + sum sq", bestGBps([&] { sink = spmd::kernels::addAndSumSquares(dst.data(), src.data(), kCount); })},
  };
  std::printf("# 1-bit kernels on %zu MiB of float32 (GB/s of float data, best of %d)\n", kBytes >> 20, kRepeats);
  std::printf("%-26s %8s %8s\n", "kernel", "GB/s", "/memcpy");
  std::printf("%-26s %8.2f %8.2f\n", "memcpy", memcpyGBps, 1.0);
  for (const Row& r : rows) std::printf("%-26s %8.2f %8.2f\n", r.name, r.gbps, r.gbps / memcpyGBps);
  const bool ok = rows[0].gbps >= 0.5 * memcpyGBps && rows[1].gbps >= 0.5 * memcpyGBps;
  std::printf("# pack and unpack >= 50%% of memcpy: %s\n", ok ? "yes" : "NO");
  return 0;
}
