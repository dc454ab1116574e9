// The one lane of the NCCL backend. Auto runs NCCL's own collective where NCCL has one (allreduce,
// reduce_scatter, all_gather, broadcast, reduce; barrier as a 1-element allreduce); a named algorithm,
// and the ops NCCL has only as grouped sends and receives, run the shared algorithms over NcclTransport.
#pragma once
#include <memory>

#include "backends/nccl/nccl_transport.h"
#include "core/transport_collectives.h"

namespace spmd::nccl {

class NcclCollectives : public Collectives {
 public:
  NcclCollectives(Comm& comm, Device& device, int rank, int size);
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Algo resolve(OpKind kind, Algo requested, size_t bytes) const override;

  void allreduce(const void* in, void* out, size_t count, DType dt, RedOp op, Algo a) override;
  void reduceScatter(const void* in, void* out, size_t count, DType dt, RedOp op, Algo a) override;
  void allGather(const void* in, void* out, size_t bytes, Algo a) override;
  void gather(const void* in, void* out, size_t bytes, int root, Algo a) override;
  void broadcast(void* data, size_t bytes, int root, Algo a) override;
  void reduce(const void* in, void* out, size_t count, DType dt, RedOp op, int root, Algo a) override;
  void scatter(const void* in, void* out, size_t count, size_t esize, int root, Algo a) override;
  void allToAll(const void* in, void* out, size_t count, size_t esize) override;
  void sendRecv(const void* in, void* out, size_t bytes, int shift) override;
  void barrier() override;
  // ncclCommSplit is not wired yet: stages that need a sub-communicator fail with kUnsupported.
  std::unique_ptr<Collectives> split(int color, int key) override;
  // One lane: igather runs when posted (NCCL has no gather of its own to overlap).
  std::unique_ptr<PostedOp> postGather(const void* in, void* out, size_t bytes, int root, Algo a) override;

  void setDeadline(Transport::Clock::time_point d) override { transport_.setDeadline(d); }
  void abort(const std::string& reason) override { comm_.abort(reason); }

 private:
  bool library(OpKind kind, Algo a, size_t bytes) const { return resolve(kind, a, bytes) == Algo::Nccl; }
  // Issues `call` (with the staged buffers) and waits for it.
  template <typename Issue>
  void run(const char* name, size_t bytes, Issue issue);

  Comm& comm_;
  Device& device_;
  int rank_, size_;
  NcclTransport transport_;
  TransportCollectives algorithms_;
  DeviceBuffer in_, out_;
};

}  // namespace spmd::nccl
