// How many cores this process may run on: its affinity mask (taskset, a cgroup cpuset, a batch
// scheduler's binding), not the machine's count. Whether ranks share cores, and so whether a waiting
// rank may spin at all, depends on it.
#pragma once

namespace spmd {

unsigned usableCores();  // at least 1
// The machine's online CPUs, the same for every process on it (0 where unknown).
unsigned onlineCores();
// Whether a launcher (or taskset, or a cgroup) bound this process to some of the machine's online CPUs.
bool boundToSome();
// Binds the calling thread to the `index`-th CPU of those it may run on; false (and nothing changed) if
// it may run on no more than `index` CPUs.
bool pinThisThread(unsigned index);
// Where the thread of lane `lane` of the `rank`-th of `ranks` ranks on this host should run: an index for
// pinThisThread, or -1 to leave it to the scheduler. A CPU of its own (rank + lane * ranks) where every
// lane's thread can have one. Where ranks outnumber the CPUs and no launcher placed the process (mpirun
// leaves oversubscribed ranks unbound), the same index round the CPUs: unbound, the scheduler moved
// waiting ranks between CPUs and paired them differently run to run, and 8-byte ops at 4 ranks on 2 cores
// took 1.2 to 2 times as long as pinned (docs/PERFORMANCE.md). A launcher's binding is left alone.
int laneCpu(unsigned rank, unsigned lane, unsigned ranks);

}  // namespace spmd
