#include "backends/shm/arena.h"

namespace spmd::shm {

Arena::Arena(const Segment& seg, ShmTransport& t, int lane)
    : seg_(seg), t_(t), lane_(lane), rank_(t.rank()), freeAt_(size_t(seg.slots()), 0) {}

void Arena::begin(bool writes, const char* what) {
  slot_ = int(chunks_++ % uint64_t(seg_.slots()));
  if (writes) t_.awaitPhase(freeAt_[size_t(slot_)], -1, what);
}

}  // namespace spmd::shm
