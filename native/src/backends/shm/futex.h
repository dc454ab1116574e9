// Process-shared futex waits on words inside the shm segment: a waiting rank sleeps in the kernel instead
// of spinning, which matters when 8 ranks share 2 cores.
#pragma once
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <ctime>

namespace spmd::shm {

// Sleeps while *word == expected, at most timeoutNs. Spurious returns are fine: callers re-check.
inline void futexWait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeoutNs) {
  timespec ts{static_cast<time_t>(timeoutNs / 1000000000), static_cast<long>(timeoutNs % 1000000000)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

inline void futexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace spmd::shm
