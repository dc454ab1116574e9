#include "backends/mpi/mpi_backend.h"

namespace spmd::mpi {

MpiBackend::MpiBackend(Runtime& rt) : nodeLocal_(Comm::nodeLocal(rt.world())) {
  const int lanes = rt.multiple() ? kMaxLanes : 1;
  for (int i = 0; i < lanes; ++i) {
    lanes_.push_back(std::make_unique<MpiCollectives>(i, Comm::dup(rt.world()), rt.faults(), rt.oversubscribed()));
  }
}

}  // namespace spmd::mpi
