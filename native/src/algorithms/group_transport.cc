#include "algorithms/group_transport.h"

#include <algorithm>
#include <string>

#include "base/error.h"

namespace spmd {

GroupTransport::GroupTransport(Transport& lane, std::vector<int> members) : lane_(lane), members_(std::move(members)) {
  for (size_t i = 0; i < members_.size(); ++i) {
    const int m = members_[i];
    if (m < 0 || m >= lane.size() || std::count(members_.begin(), members_.end(), m) != 1) {
      throw CommError(code::kInvalid, "group: rank " + std::to_string(m) + " is not a distinct rank of " +
                                          std::to_string(lane.size()));
    }
    if (m == lane.rank()) rank_ = int(i);
  }
  if (rank_ < 0) throw CommError(code::kInvalid, "group: rank " + std::to_string(lane.rank()) + " is not a member");
}

void GroupTransport::exchange(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs) {
  sends_.clear();
  recvs_.clear();
  for (const SendSpec& s : sends) sends_.push_back({members_[size_t(s.peer)], s.data, s.bytes});
  for (const RecvSpec& r : recvs) recvs_.push_back({members_[size_t(r.peer)], r.data, r.bytes});
  lane_.exchange(sends_, recvs_);
}

std::optional<NodeGroups> nodeGroups(std::span<const int> nodeOf, int rank) {
  std::vector<int> ids;                // the nodes' numbers, in order of their lowest rank
  std::vector<std::vector<int>> nodes;  // each one's ranks
  for (int r = 0; r < int(nodeOf.size()); ++r) {
    const auto i = size_t(std::find(ids.begin(), ids.end(), nodeOf[size_t(r)]) - ids.begin());
    if (i == ids.size()) {
      ids.push_back(nodeOf[size_t(r)]);
      nodes.emplace_back();
    }
    nodes[i].push_back(r);
  }
  if (nodes.size() < 2 || nodes[0].size() < 2) return std::nullopt;
  for (const std::vector<int>& n : nodes) if (n.size() != nodes[0].size()) return std::nullopt;
  NodeGroups g;
  g.node = nodes[size_t(std::find(ids.begin(), ids.end(), nodeOf[size_t(rank)]) - ids.begin())];
  const auto local = size_t(std::find(g.node.begin(), g.node.end(), rank) - g.node.begin());
  for (const std::vector<int>& n : nodes) g.across.push_back(n[local]);
  return g;
}

}  // namespace spmd
