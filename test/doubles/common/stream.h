// A stream of the device doubles (cuda/, acl/), which the vendor doubles (nccl/, hccl/) queue their
// collectives on: the engine's thread runs a collective and counts it done. Copies and kernels run at once
// on the caller's thread after drain(), so the stream's order holds: the backend waits for each collective
// before it issues more, so drain() finds the stream idle and never blocks for long.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace spmd::doubles {

struct Stream {
  std::atomic<uint64_t> issued{0}, done{0};

  bool idle() const { return done.load() == issued.load(); }
  void drain() const {
    while (!idle()) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
};

}  // namespace spmd::doubles
