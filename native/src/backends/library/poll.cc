#include "backends/library/poll.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace spmd::library {
namespace {

constexpr int kYields = 16;
constexpr auto kFirstSleep = std::chrono::microseconds(8);
constexpr auto kMaxSleep = std::chrono::microseconds(1000);

}  // namespace

void pollPause(int attempt) {
  if (attempt < kYields) {
    sched_yield();
    return;
  }
  std::this_thread::sleep_for(std::min(kFirstSleep * (1 << std::min(attempt - kYields, 16)), kMaxSleep));
}

}  // namespace spmd::library
