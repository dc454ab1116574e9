#include "runtime/transport_collectives.h"

#include <algorithm>
#include <vector>

#include "algorithms/collectives.h"
#include "algorithms/group_transport.h"

namespace spmd {
namespace {

// Below this, latency dominates and the log-depth tree beats the 2(W-1)-step ring.
constexpr size_t kTreeBelowBytes = 32 * 1024;

}  // namespace

void TransportCollectives::knowNodes(std::vector<int> nodeOf) {
  nodeOf_ = std::move(nodeOf);
  if (nodeOf_.size() == size_t(size())) nodeGroups_ = nodeGroups(nodeOf_, rank());
}

Algo TransportCollectives::resolve(OpKind kind, Algo requested, size_t bytes) const {
  if (requested == Algo::Shared) {
    throw CommError(code::kUnsupported, std::string("algorithm \"shared\" needs the shm backend (every rank on one host)"));
  }
  if (requested == Algo::Hierarchical) {
    if (kind != OpKind::AllReduce) throw CommError(code::kUnsupported, std::string("algorithm \"hierarchical\" is for allreduce only"));
    // It needs two even levels of nodes; elsewhere the ring runs, and the results say so.
    return nodeGroups_ ? Algo::Hierarchical : Algo::Ring;
  }
  if (requested != Algo::Auto) return requested;
  bool small = bytes < kTreeBelowBytes;
  switch (kind) {
    case OpKind::AllReduce: return small ? Algo::Tree : nodeGroups_ ? Algo::Hierarchical : Algo::Ring;
    case OpKind::ReduceScatter: case OpKind::AllGather: return small ? Algo::Direct : Algo::Ring;
    case OpKind::Gather: case OpKind::Scatter: return small ? Algo::Tree : Algo::Direct;
    case OpKind::Broadcast: case OpKind::Reduce: return Algo::Tree;
    case OpKind::AllToAll: case OpKind::AllToAllv: case OpKind::SendRecv: return Algo::Direct;
    case OpKind::Barrier: return Algo::Dissemination;
    case OpKind::Compute: return Algo::Auto;
  }
  return requested;
}

void TransportCollectives::allreduce(const void* in, void* out, size_t count, DType dt, RedOp op, Algo a) {
  switch (resolve(OpKind::AllReduce, a, count * elementSize(dt))) {
    case Algo::Tree: return algo::allreduceTree(t_, ws_, in, out, count, dt, op);
    case Algo::Direct: return algo::allreduceDirect(t_, ws_, in, out, count, dt, op);
    case Algo::Hierarchical: return algo::allreduceHierarchical(t_, ws_, *nodeGroups_, in, out, count, dt, op);
    default: return algo::allreduceRing(t_, ws_, in, out, count, dt, op);
  }
}

void TransportCollectives::reduceScatter(const void* in, void* out, size_t count, DType dt, RedOp op, Algo a) {
  if (resolve(OpKind::ReduceScatter, a, count * elementSize(dt)) == Algo::Direct)
    return algo::reduceScatterDirect(t_, ws_, in, out, count, dt, op);
  algo::reduceScatterRing(t_, ws_, in, out, count, dt, op);
}

void TransportCollectives::allGather(const void* in, void* out, size_t bytes, Algo a) {
  if (resolve(OpKind::AllGather, a, bytes * size()) == Algo::Direct) return algo::allGatherDirect(t_, in, out, bytes);
  algo::allGatherRing(t_, in, out, bytes);
}

void TransportCollectives::gather(const void* in, void* out, size_t bytes, int root, Algo a) {
  if (resolve(OpKind::Gather, a, bytes * size()) == Algo::Tree) return algo::gatherTree(t_, ws_, in, out, bytes, root);
  algo::gatherDirect(t_, in, out, bytes, root);
}

void TransportCollectives::broadcast(void* data, size_t bytes, int root, Algo a) {
  if (resolve(OpKind::Broadcast, a, bytes) == Algo::Direct) return algo::broadcastDirect(t_, data, bytes, root);
  algo::broadcastTree(t_, data, bytes, root);
}

void TransportCollectives::reduce(const void* in, void* out, size_t count, DType dt, RedOp op, int root, Algo a) {
  if (resolve(OpKind::Reduce, a, count * elementSize(dt)) == Algo::Direct)
    return algo::reduceDirect(t_, ws_, in, out, count, dt, op, root);
  algo::reduceTree(t_, ws_, in, out, count, dt, op, root);
}

void TransportCollectives::scatter(const void* in, void* out, size_t count, size_t esize, int root, Algo a) {
  if (resolve(OpKind::Scatter, a, count * esize) == Algo::Tree)
    return algo::scatterTree(t_, ws_, in, out, count, esize, root);
  algo::scatterDirect(t_, in, out, count, esize, root);
}

void TransportCollectives::allToAll(const void* in, void* out, size_t count, size_t esize, Algo /*a*/) {
  algo::allToAllDirect(t_, in, out, count, esize);
}

void TransportCollectives::allToAllv(const void* in, void* out, const AllToAllvCounts& c, size_t esize, Algo /*a*/) {
  algo::allToAllvDirect(t_, in, out, c, esize);
}

void TransportCollectives::sendRecv(const void* in, void* out, size_t bytes, int to, int from) {
  algo::sendRecvPeers(t_, in, out, bytes, to, from);
}

void TransportCollectives::barrier(Algo) { algo::barrierDissemination(t_); }

std::unique_ptr<Collectives> TransportCollectives::split(int color, int key) {
  const int W = size();
  const int mine[2] = {color, key};
  std::vector<int> all(2 * size_t(W));
  allGather(mine, all.data(), sizeof mine, Algo::Auto);
  std::vector<int> members;
  for (int j = 0; j < W; ++j) if (all[2 * size_t(j)] == color) members.push_back(j);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return all[2 * size_t(a) + 1] < all[2 * size_t(b) + 1]; });
  std::vector<int> nodeOf;
  if (!nodeOf_.empty()) for (int m : members) nodeOf.push_back(nodeOf_[size_t(m)]);
  return std::make_unique<TransportCollectives>(std::make_unique<GroupTransport>(t_, std::move(members)), onAbort_, std::move(nodeOf));
}

}  // namespace spmd
