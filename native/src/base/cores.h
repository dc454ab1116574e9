// How many cores this process may run on: its affinity mask (taskset, a cgroup cpuset, a batch
// scheduler's binding), not the machine's count. Whether ranks share cores, and so whether a waiting
// rank may spin at all, depends on it.
#pragma once

namespace spmd {

unsigned usableCores();  // at least 1
// Whether a launcher (or taskset, or a cgroup) bound this process to some of the machine's online CPUs.
bool boundToSome();
// Binds the calling thread to the `index`-th CPU of those it may run on; false (and nothing changed) if
// it may run on no more than `index` CPUs.
bool pinThisThread(unsigned index);

}  // namespace spmd
