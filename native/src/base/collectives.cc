#include "base/collectives.h"

#include <algorithm>
#include <array>
#include <utility>

namespace spmd {
namespace {

constexpr std::array<std::pair<Algo, std::string_view>, 10> kAlgos{{
    {Algo::Auto, "auto"}, {Algo::Ring, "ring"}, {Algo::Tree, "tree"}, {Algo::Direct, "direct"},
    {Algo::Dissemination, "dissemination"}, {Algo::Hierarchical, "hierarchical"}, {Algo::Shared, "shared"},
    {Algo::Mpi, "mpi"}, {Algo::Nccl, "nccl"}, {Algo::Hccl, "hccl"}}};

constexpr std::array<std::pair<OpKind, std::string_view>, 12> kOps{{
    {OpKind::AllReduce, "allreduce"}, {OpKind::ReduceScatter, "reduce_scatter"}, {OpKind::AllGather, "all_gather"},
    {OpKind::Gather, "gather"}, {OpKind::Broadcast, "broadcast"}, {OpKind::Reduce, "reduce"},
    {OpKind::Scatter, "scatter"}, {OpKind::AllToAll, "all_to_all"}, {OpKind::AllToAllv, "all_to_allv"}, {OpKind::SendRecv, "send_recv"},
    {OpKind::Barrier, "barrier"}, {OpKind::Compute, "compute"}}};

template <typename E, size_t N>
bool lookup(const std::array<std::pair<E, std::string_view>, N>& table, std::string_view name, E& out) {
  for (auto& [v, n] : table) {
    if (n == name) { out = v; return true; }
  }
  return false;
}

template <typename E, size_t N>
std::vector<std::string_view> names(const std::array<std::pair<E, std::string_view>, N>& table) {
  std::vector<std::string_view> out;
  for (auto& [v, n] : table) out.push_back(n);
  return out;
}

}  // namespace

AllToAllvCounts AllToAllvCounts::of(const std::vector<size_t>& matrix, int W, int r) {
  AllToAllvCounts c;
  const auto w = size_t(W), me = size_t(r);
  size_t sent = 0, received = 0;
  for (size_t j = 0; j < w; ++j) {
    c.sendOffsets.push_back(sent);
    c.sendCounts.push_back(matrix[me * w + j]);
    sent += c.sendCounts.back();
    c.recvOffsets.push_back(received);
    c.recvCounts.push_back(matrix[j * w + me]);
    received += c.recvCounts.back();
  }
  for (size_t n : matrix) c.largestBlock = std::max(c.largestBlock, n);
  return c;
}

std::string_view algoName(Algo a) {
  for (auto& [v, n] : kAlgos) if (v == a) return n;
  return "?";
}
std::string_view opKindName(OpKind k) {
  for (auto& [v, n] : kOps) if (v == k) return n;
  return "?";
}
std::vector<std::string_view> algoNames() { return names(kAlgos); }
std::vector<std::string_view> opKindNames() { return names(kOps); }
bool parseAlgo(std::string_view name, Algo& out) { return lookup(kAlgos, name, out); }
bool parseOpKind(std::string_view name, OpKind& out) { return lookup(kOps, name, out); }

}  // namespace spmd
