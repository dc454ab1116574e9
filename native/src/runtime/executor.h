// Runs a Program: warmup + iterations steps, each executing every op once in order, timing each op with
// a monotonic clock. Each stream's ops run on a lane of their own (lane 0 on this thread, the others on
// workers), so streams really overlap; a step ends when every lane has drained.
// Tensors live in the backend's memory: filled on the host, placed there once before the first step, and
// outputs brought back once after the last (each step's for an estimating op's error, untimed).
#pragma once
#include <atomic>
#include <vector>

#include "runtime/backend.h"
#include "runtime/program.h"

namespace spmd {

class Executor {
 public:
  Executor(Backend& backend, const Program& program);
  std::vector<OpResult> run();
  // The filled input tensors of the last run, in program order (for dumps).
  std::vector<HostBytes> takeTensors() { return std::move(tensors_); }
  // Steps finished so far are published here, for a progress display polling from another thread.
  void publishProgress(std::atomic<int64_t>* steps) { progress_ = steps; }

 private:
  struct Prepared;
  struct Run;
  Prepared prepare(const OpSpec& spec, Collectives& c);
  void fillTensors();
  Collectives& laneOf(const OpSpec& s);
  Collectives& communicator(Run& run, const OpSpec& s);
  void prepareAll(Run& run);
  void startWorker(Run& run, int lane);
  void setUpEstimators(Run& run);
  void stepStart(Run& run, int step);
  void alignRanks(int step);
  void runStep(Run& run, int step);
  void post(Run& run, Prepared& p, int step);
  void postOnLane0(Prepared& p, int step);
  void postReady(Run& run, size_t& next, size_t ran, int step);
  void complete(Run& run, size_t i);
  void keepTimes(Run& run, size_t i, Transport::Clock::time_point t0, Transport::Clock::time_point t1);
  void observe(Prepared& p);
  void runTimed(Run& run, size_t i, int step);
  void finish(Run& run);
  void execute(Collectives& c, TypedOps& typed, Prepared& p, Transport::Clock::time_point deadline);
  void packCoalesced(Prepared& p, int worldSize);
  void prepareInPlace(Prepared& p, int worldSize, int rank);
  void refill(Prepared& p, Memory& lane);
  void placeTensors();
  const void* tensor(int i) const;

  Backend& backend_;
  Memory& memory_;
  Collectives& lane0_;  // host pointers: setup, the step barrier, the flight record
  Collectives& data0_;  // lane 0 over pointers into memory_
  const Program& program_;
  std::vector<HostBytes> tensors_;  // as filled, on the host
  std::vector<Buffer> placed_;                 // their copies in memory_, unless that is host memory
  std::atomic<int64_t>* progress_ = nullptr;
};

}  // namespace spmd
