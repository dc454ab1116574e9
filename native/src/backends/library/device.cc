#include "backends/library/device.h"

#include "backends/library/poll.h"

namespace spmd::library {

void Device::synchronize() {
  issued();
  for (int attempt = 0; !idle(); ++attempt) pollPause(attempt);
}

}  // namespace spmd::library
