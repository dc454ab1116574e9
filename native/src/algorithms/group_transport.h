// Some ranks of a Transport as a Transport of their own: group rank i is the lane's rank members[i]. This
// is how transport-based backends (shm, tcp) give a sub-communicator (Collectives::split) every shared
// algorithm without a copy: the algorithms see ranks 0..size-1 of the group, and each message travels on
// the lane's connection between the two real ranks. That stays correct beside the lane's own traffic
// because bytes between a pair of ranks are FIFO and every rank issues its ops in the same order, so each
// pair agrees on which message comes next whichever group sent it.
#pragma once
#include <optional>
#include <span>
#include <vector>

#include "base/transport.h"

namespace spmd {

class GroupTransport final : public Transport {
 public:
  // `members`: distinct ranks of `lane`, in group order, this rank among them. `lane` must outlive this.
  GroupTransport(Transport& lane, std::vector<int> members);
  int rank() const override { return rank_; }
  int size() const override { return int(members_.size()); }
  // Errors name the lane's ranks, which are the ones a user knows.
  void exchange(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs) override;
  // One deadline: the lane's (which the executor sets per op).
  void setDeadline(Clock::time_point d) override { lane_.setDeadline(d); }

 private:
  Transport& lane_;
  std::vector<int> members_;
  int rank_ = -1;
  std::vector<SendSpec> sends_;  // the lane's ranks; reused, so no allocation once warm
  std::vector<RecvSpec> recvs_;
};

// The two groups of a collective in two levels, as ranks of a transport whose rank r sits on node nodeOf[r]
// (nodes in order of their lowest rank, ranks in rank order): this rank's node, and the ranks of this
// rank's local index, one on each node. None where there are no two levels: one node, one rank per node,
// or nodes of unequal size.
struct NodeGroups {
  std::vector<int> node, across;
};
std::optional<NodeGroups> nodeGroups(std::span<const int> nodeOf, int rank);

}  // namespace spmd
