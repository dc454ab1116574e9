// Runs a Program: warmup + iterations steps, each executing every op once in order, timing each op with
// a monotonic clock. Nonblocking ops run on a second lane so they really overlap what follows them.
#pragma once
#include <atomic>
#include <vector>

#include "core/collectives.h"
#include "core/program.h"

namespace spmd {

class Executor {
 public:
  // lane1 may be null when the program has no nonblocking op.
  Executor(Collectives& lane0, Collectives* lane1, const Program& program);
  std::vector<OpResult> run();
  // The filled input tensors of the last run, in program order (for dumps).
  std::vector<std::vector<uint8_t>> takeTensors() { return std::move(tensors_); }
  // Steps finished so far are published here, for a progress display polling from another thread.
  void publishProgress(std::atomic<int64_t>* steps) { progress_ = steps; }

 private:
  struct Prepared;
  Prepared prepare(const OpSpec& spec);
  void execute(Collectives& c, TypedOps& typed, Prepared& p, Transport::Clock::time_point deadline);
  void packCoalesced(const Prepared& p, int worldSize);

  Collectives& lane0_;
  Collectives* lane1_;
  const Program& program_;
  std::vector<std::vector<uint8_t>> tensors_;
  std::atomic<int64_t>* progress_ = nullptr;
};

}  // namespace spmd
