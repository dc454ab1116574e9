// The shm backend's collectives: the "shared" algorithms, which stage chunks in each rank's slots of the
// segment and let peers reduce and copy straight out of them (one copy in, one copy out, no per-pair
// channel), plus every transport algorithm for the ops and names they do not cover.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "backends/shm/arena.h"
#include "core/transport_collectives.h"

namespace spmd::shm {

class SharedCollectives : public TransportCollectives {
 public:
  SharedCollectives(const Segment& seg, ShmTransport& t, int lane, std::function<void(const std::string&)> onAbort);
  Algo resolve(OpKind kind, Algo requested, size_t bytes) const override;

  void allreduce(const void* in, void* out, size_t count, DType dt, RedOp op, Algo a) override;
  void reduceScatter(const void* in, void* out, size_t count, DType dt, RedOp op, Algo a) override;
  void allGather(const void* in, void* out, size_t bytes, Algo a) override;
  void gather(const void* in, void* out, size_t bytes, int root, Algo a) override;
  void broadcast(void* data, size_t bytes, int root, Algo a) override;
  void allToAll(const void* in, void* out, size_t count, size_t esize, Algo a) override;

 private:
  Arena arena_;
  std::vector<const void*> xs_;  // each rank's operand of one fold, kept so that folding allocates nothing
};

}  // namespace spmd::shm
