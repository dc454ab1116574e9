// Rendezvous data among all ranks over MPI, for the bootstrap (host names, the shm segment's name, the
// run directory): small strings, on the runtime's own copy of the world, bounded by a deadline.
#pragma once
#include <string>
#include <vector>

#include "backends/mpi/runtime.h"
#include "backends/mpi/waiter.h"

namespace spmd::mpi {

class Exchange {
 public:
  using Clock = Waiter::Clock;
  explicit Exchange(Runtime& rt) : rt_(rt), waiter_(rt.faults(), rt.oversubscribed()) {}

  // Every rank's `mine`, in rank order.
  std::vector<std::string> allGather(const std::string& mine, Clock::time_point deadline);
  // `root`'s value on every rank (the others' `value` is ignored).
  std::string broadcast(const std::string& value, int root, Clock::time_point deadline);
  void barrier(Clock::time_point deadline);

 private:
  void complete(MPI_Request& req, const char* call, Clock::time_point deadline);

  Runtime& rt_;
  Waiter waiter_;
};

}  // namespace spmd::mpi
