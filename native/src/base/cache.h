// The size of the last-level cache, as this machine's sysfs reports it for cpu0 (sysconf's answer can be
// the host's, not the VM's). What a data path may assume stays cached between uses.
#pragma once
#include <cstddef>

namespace spmd {

size_t lastLevelCacheBytes();  // 32 MiB when nothing says otherwise

}  // namespace spmd
