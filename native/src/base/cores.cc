#include "base/cores.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

namespace spmd {
namespace {

// The CPUs this process may run on: its main thread's mask (the thread id of the main thread is the pid). The
// calling thread's own may be one CPU already, where a lane's thread was pinned (pinThisThread) before it asks.
bool processCpus(cpu_set_t& set) {
  CPU_ZERO(&set);
  return sched_getaffinity(getpid(), sizeof set, &set) == 0;
}

}  // namespace

unsigned usableCores() {
  cpu_set_t set;
  if (processCpus(set)) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

unsigned onlineCores() { return unsigned(std::max(0L, sysconf(_SC_NPROCESSORS_ONLN))); }

bool boundToSome() {
  const unsigned online = onlineCores();
  return online > 0 && usableCores() < online;
}

bool pinThisThread(unsigned index) {
  cpu_set_t set;
  if (!processCpus(set)) return false;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set) || index-- > 0) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return sched_setaffinity(0, sizeof one, &one) == 0;
  }
  return false;
}

int laneCpu(unsigned rank, unsigned lane, unsigned ranks) {
  const unsigned cores = usableCores(), index = rank + lane * ranks;
  if (index < cores && (lane + 1) * ranks <= cores) return int(index);
  if (ranks > cores && !boundToSome()) return int(index % cores);
  return -1;
}

}  // namespace spmd
