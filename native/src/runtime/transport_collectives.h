// Collectives for backends that only move bytes (shm, tcp): the shared algorithms over one Transport.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "algorithms/group_transport.h"
#include "base/collectives.h"
#include "runtime/flight_recorder.h"
#include "base/workspace.h"

namespace spmd {

class TransportCollectives : public Collectives {
 public:
  // `onAbort` tells the other ranks (the transport's own broadcast of an abort). `nodeOf[r]`: rank r's node,
  // where the backend knows it (else empty); with two levels of even nodes, allreduce has "hierarchical".
  TransportCollectives(Transport& t, std::function<void(const std::string&)> onAbort, std::vector<int> nodeOf = {})
      : t_(t), onAbort_(std::move(onAbort)) {
    t_.setRecorder(&flight_);
    knowNodes(std::move(nodeOf));
  }
  // A sub-communicator's collectives, which own its transport (a GroupTransport). Its exchanges are
  // recorded by the lane whose transport the group forwards to, in the lane's op.
  TransportCollectives(std::unique_ptr<Transport> owned, std::function<void(const std::string&)> onAbort,
                       std::vector<int> nodeOf = {})
      : owned_(std::move(owned)), t_(*owned_), onAbort_(std::move(onAbort)) {
    knowNodes(std::move(nodeOf));
  }
  int rank() const override { return t_.rank(); }
  LinkUsage linkUsage() const override { return t_.linkUsage(); }
  int size() const override { return t_.size(); }
  Algo resolve(OpKind kind, Algo requested, size_t bytes) const override;

  void allreduce(const void* in, void* out, size_t count, DType dt, RedOp op, Algo a) override;
  void reduceScatter(const void* in, void* out, size_t count, DType dt, RedOp op, Algo a) override;
  void allGather(const void* in, void* out, size_t bytes, Algo a) override;
  void gather(const void* in, void* out, size_t bytes, int root, Algo a) override;
  void broadcast(void* data, size_t bytes, int root, Algo a) override;
  void reduce(const void* in, void* out, size_t count, DType dt, RedOp op, int root, Algo a) override;
  void scatter(const void* in, void* out, size_t count, size_t esize, int root, Algo a) override;
  void allToAll(const void* in, void* out, size_t count, size_t esize, Algo a) override;
  void allToAllv(const void* in, void* out, const AllToAllvCounts& c, size_t esize, Algo a) override;
  void sendRecv(const void* in, void* out, size_t bytes, int to, int from) override;
  void barrier(Algo a) override;
  // Members come from an all-gather of every rank's (color, key); the group moves data on this transport.
  std::unique_ptr<Collectives> split(int color, int key) override;
  void setDeadline(Transport::Clock::time_point d) override { t_.setDeadline(d); }
  void abort(const std::string& reason) override { onAbort_(reason); }
  FlightRecorder& flight() override { return flight_; }

 private:
  std::unique_ptr<Transport> owned_;  // before t_, which may refer to it
  Transport& t_;
  Workspace ws_;
  std::function<void(const std::string&)> onAbort_;
  FlightRecorder flight_;
  std::vector<int> nodeOf_;
  std::optional<NodeGroups> nodeGroups_;  // where the nodes are two even levels: the hierarchical allreduce's
  void knowNodes(std::vector<int> nodeOf);
};

}  // namespace spmd
