#include "backends/mpi/mpi_backend.h"

#include "base/cores.h"

namespace spmd::mpi {

MpiBackend::MpiBackend(Runtime& rt)
    : faults_(rt.faults()), nodeLocal_(Comm::nodeLocal(rt.world())), watchdog_(rt.faults(), rt.rank(), rt.multiple(), rt.oversubscribed()) {
  const int lanes = rt.multiple() ? kMaxLanes : 1;
  for (int i = 0; i < lanes; ++i) {
    const int cpu = laneCpu(unsigned(nodeLocal_.rank()), unsigned(i), unsigned(nodeLocal_.size()));
    lanes_.push_back(std::make_unique<MpiCollectives>(i, Comm::dup(rt.world()), rt.faults(), watchdog_, rt.oversubscribed(), cpu));
  }
}

}  // namespace spmd::mpi
