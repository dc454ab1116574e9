// The MPI backend: one MpiCollectives per lane, each on a communicator of its own, and the watchdog that
// holds their deadlines. Two lanes when MPI granted MPI_THREAD_MULTIPLE (lane 1 then calls MPI from the
// executor's lane thread); otherwise one, and igather is posted on lane 0 and completed where it is needed
// (Collectives::postGather).
#pragma once
#include <memory>
#include <vector>

#include "backends/mpi/mpi_collectives.h"
#include "backends/mpi/runtime.h"
#include "backends/mpi/watchdog.h"
#include "runtime/backend.h"

namespace spmd::mpi {

class MpiBackend : public Backend {
 public:
  // Collective over every rank; on the MPI thread. `rt` must outlive the backend.
  explicit MpiBackend(Runtime& rt);
  std::string name() const override { return "mpi"; }
  Collectives& lane(int i) override { return *lanes_[size_t(i)]; }
  int lanes() const override { return int(lanes_.size()); }
  void onFatal(FatalHandler h) override { watchdog_.onFatal(std::move(h)); }
  bool wedged() const override { return faults_.wedged(); }

  // The ranks on this node (MPI_COMM_TYPE_SHARED): where hierarchical stages run their intra-node step.
  const Comm& nodeLocal() const { return nodeLocal_; }

 private:
  Faults& faults_;
  Comm nodeLocal_;
  Watchdog watchdog_;
  std::vector<std::unique_ptr<MpiCollectives>> lanes_;  // after the watchdog: gone before it stops
};

}  // namespace spmd::mpi
