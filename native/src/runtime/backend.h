// A started backend: its lanes of collectives and how it is torn down. The communicator owns one.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "base/collectives.h"
#include "kernels/memory.h"

namespace spmd {

// Lanes a backend offers at most, one per stream of a job (graph/groups.ts MAX_STREAMS): "main" and three.
constexpr int kMaxLanes = 4;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Collective, on the progress thread: joins the other ranks where that blocks until all arrive
  // (ncclCommInitRank), so that it never blocks JavaScript. Backends that join when built do nothing.
  virtual void connect() {}
  // How the backend moves large messages where it has more than one way, as agreed at connect() (shm:
  // single copy or staged, and why); "" where it has one.
  virtual std::string copyPath() const { return ""; }
  // Nanoseconds a cache line takes from the host's first rank to each other rank and back, as timed at
  // connect() (shm: backends/shm/core_probe.h); empty where the backend does not time it.
  virtual std::vector<double> coreRoundTrips() const { return {}; }
  // Lanes take host pointers, one per stream: 0 runs the "main" stream on the step's thread, the others
  // run concurrently, each on a worker of its own (base/lane_worker.h).
  virtual Collectives& lane(int i) = 0;
  virtual int lanes() const = 0;
  // Where the job's tensors live: host memory, or a library backend's device, where they stay for the run.
  virtual Memory& memory() { return hostMemory(); }
  // Lane i's view of memory(): a library backend's device with the lane's own stream, where the lane's
  // copies and kernels go.
  virtual Memory& laneMemory(int) { return memory(); }
  // Lane i over pointers into memory(): lane(i) itself where that is host memory.
  virtual Collectives& deviceLane(int i) { return lane(i); }
  // On lane i's worker thread, before its first op: what the thread needs to issue work (a device).
  virtual void enterLane(int) {}
  // Drops whatever names other processes could still find (shm name); safe to call repeatedly.
  virtual void release() {}

  // Where the error of an op that will never return goes (the MPI backend's watchdog, for a lane stuck
  // inside a blocking MPI call): (code, message), on a thread of the backend's own. A backend whose ops
  // always return (they wait in code of ours, bounded) never calls it.
  using FatalHandler = std::function<void(const char* code, const std::string& message)>;
  virtual void onFatal(FatalHandler) {}
  // An op was given up on that still runs: the backend cannot be torn down, only left to the process's
  // end (which ends the job).
  virtual bool wedged() const { return false; }
};

}  // namespace spmd
