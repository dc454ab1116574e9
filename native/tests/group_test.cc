// Sub-communicators of the transport-based backends (TransportCollectives::split over GroupTransport), run
// over the threaded transport double with tiny channels: groups ranked by (key, rank), collectives inside
// two different partitions of the same ranks interleaved with the whole lane's own collectives (the
// quantized allreduce's pattern), and a group whose order reverses the lane's. Every element on every rank
// is compared with a plain reference. Exits non-zero on a failure.
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/group_transport.h"
#include "runtime/transport_collectives.h"
#include "thread_transport_double.h"

namespace {

using namespace spmd;

int failed = 0, passed = 0;

void check(bool ok, const std::string& what) {
  ok ? ++passed : ++failed;
  if (!ok && failed <= 20) std::printf("FAIL %s\n", what.c_str());
}

// One check per case: no rank failed, and every rank found what it expected.
void report(const std::string& name, const std::vector<std::string>& errors, const std::vector<std::string>& problems) {
  std::string all;
  for (const std::string& e : errors) all += e + "; ";
  for (size_t r = 0; r < problems.size(); ++r) if (!problems[r].empty()) all += "rank " + std::to_string(r) + ": " + problems[r];
  check(all.empty(), name + ": " + all);
}

int64_t value(int rank, size_t i) { return int64_t(rank) * 1000 + int64_t(i); }

// Nodes of L consecutive ranks: `intra` holds a node's ranks, `inter` the ranks of one local index.
void testNodes(int W, int L, size_t count) {
  const std::string name = "W=" + std::to_string(W) + " L=" + std::to_string(L) + " count=" + std::to_string(count);
  const int N = W / L;
  std::vector<std::string> problems(static_cast<size_t>(W));
  auto errors = testing::runRanksOnThreads(W, 64, [&](Transport& t) {
    const int r = t.rank(), node = r / L, local = r % L;
    TransportCollectives world(t, [](const std::string&) {});
    auto intra = world.split(node, local);
    auto inter = world.split(local, node);
    std::string& bad = problems[size_t(r)];
    if (intra->rank() != local || intra->size() != L || inter->rank() != node || inter->size() != N) bad += "ranks; ";

    // A sum over the node, then an all-to-all across nodes, with a world allreduce between them.
    std::vector<int64_t> in(count), nodeSum(count), worldSum(count);
    for (size_t i = 0; i < count; ++i) in[i] = value(r, i);
    intra->allreduce(in.data(), nodeSum.data(), count, DType::I64, RedOp::Sum, Algo::Ring);
    world.allreduce(in.data(), worldSum.data(), count, DType::I64, RedOp::Sum, Algo::Auto);
    std::vector<int64_t> blocks(size_t(N) * count), mixed(size_t(N) * count);
    for (size_t k = 0; k < blocks.size(); ++k) blocks[k] = value(r, k);
    inter->allToAll(blocks.data(), mixed.data(), size_t(N) * count, sizeof(int64_t), Algo::Auto);
    for (size_t i = 0; i < count; ++i) {
      int64_t ofNode = 0, all = 0;
      for (int l = 0; l < L; ++l) ofNode += value(node * L + l, i);
      for (int j = 0; j < W; ++j) all += value(j, i);
      if (nodeSum[i] != ofNode) bad += "node sum " + std::to_string(i) + "; ";
      if (worldSum[i] != all) bad += "world sum " + std::to_string(i) + "; ";
    }
    // Group rank a (world rank a·L + local) sent its block `node` (count values from node·count).
    for (int a = 0; a < N; ++a)
      for (size_t i = 0; i < count; ++i)
        if (mixed[size_t(a) * count + i] != value(a * L + local, size_t(node) * count + i)) bad += "all-to-all; ";
  });
  report(name, errors, problems);
}

// One group of every rank with decreasing keys: group rank 0 is the lane's last rank, so a broadcast from
// group root 0 delivers rank W-1's data. Ties in key keep the lane's order.
void testOrder(int W) {
  const std::string name = "order W=" + std::to_string(W);
  std::vector<std::string> problems(static_cast<size_t>(W));
  auto errors = testing::runRanksOnThreads(W, 64, [&](Transport& t) {
    const int r = t.rank();
    TransportCollectives world(t, [](const std::string&) {});
    auto reversed = world.split(7, -r);
    auto tied = world.split(7, 0);
    std::string& bad = problems[size_t(r)];
    if (reversed->rank() != W - 1 - r || tied->rank() != r) bad += "ranks; ";
    std::vector<int64_t> data(5);
    for (size_t i = 0; i < data.size(); ++i) data[i] = value(r, i);
    reversed->broadcast(data.data(), data.size() * sizeof(int64_t), 0, Algo::Tree);
    for (size_t i = 0; i < data.size(); ++i) if (data[i] != value(W - 1, i)) bad += "broadcast; ";
  });
  report(name, errors, problems);
}

void testNodeGroups() {
  check(!nodeGroups(std::vector<int>{0, 0, 0, 1, 1}, 0), "nodeGroups: 3 + 2 ranks are no two even levels");
  check(!nodeGroups(std::vector<int>{0, 0}, 1), "nodeGroups: one node is no two levels");
  check(!nodeGroups(std::vector<int>{0, 1, 2}, 2), "nodeGroups: one rank per node is no two levels");
  // Nodes in order of their lowest rank whatever their numbers: 5 = {0, 2}, 2 = {1, 3}, 7 = {4, 5}.
  const std::optional<NodeGroups> g = nodeGroups(std::vector<int>{5, 2, 5, 2, 7, 7}, 3);
  check(g && g->node == std::vector<int>{1, 3} && g->across == std::vector<int>{2, 3, 5}, "nodeGroups: rank 3's node and local index");
}

// A world whose ranks sit on nodes as `nodeOf` says: auto's allreduce is hierarchical exactly where the nodes
// are two even levels, and every element is right, in the world and in a group split from it (the even and
// the odd ranks, whose own nodes differ from the world's).
void testHierarchical(const std::vector<int>& nodeOf, bool twoLevels) {
  const int W = int(nodeOf.size());
  std::string name = "hierarchical nodeOf=";
  for (int n : nodeOf) name += std::to_string(n);
  std::vector<std::string> problems(static_cast<size_t>(W));
  const size_t count = 100003;
  auto errors = testing::runRanksOnThreads(W, 4096, [&](Transport& t) {
    const int r = t.rank();
    TransportCollectives world(t, [](const std::string&) {}, nodeOf);
    std::string& bad = problems[size_t(r)];
    const Algo want = twoLevels ? Algo::Hierarchical : Algo::Ring;
    if (world.resolve(OpKind::AllReduce, Algo::Auto, count * 8) != want || world.resolve(OpKind::AllReduce, Algo::Hierarchical, 8) != want)
      bad += "resolved " + std::string(algoName(world.resolve(OpKind::AllReduce, Algo::Auto, count * 8))) + "; ";
    auto parity = world.split(r % 2, r);
    for (Collectives* c : {static_cast<Collectives*>(&world), parity.get()}) {
      std::vector<int64_t> in(count), out(count);
      for (size_t i = 0; i < count; ++i) in[i] = value(r, i);
      c->allreduce(in.data(), out.data(), count, DType::I64, RedOp::Sum, Algo::Hierarchical);
      for (size_t i = 0; i < count; ++i) {
        int64_t want = 0;
        for (int j = c == &world ? 0 : r % 2; j < W; j += c == &world ? 1 : 2) want += value(j, i);
        if (out[i] != want) {
          bad += (c == &world ? "world" : "parity") + std::string(" element ") + std::to_string(i) + "; ";
          break;
        }
      }
    }
  });
  report(name, errors, problems);
}

}  // namespace

int main() {
  testNodeGroups();
  for (auto [nodeOf, twoLevels] : {std::pair{std::vector<int>{0, 0, 1, 1}, true}, {std::vector<int>{0, 1, 0, 1}, true},
                                   {std::vector<int>{0, 0, 0, 1, 1, 1}, true}, {std::vector<int>{0, 0, 0, 1, 1}, false},
                                   {std::vector<int>{0, 1, 2, 3}, false}, {std::vector<int>{0, 0, 0, 0}, false}})
    testHierarchical(nodeOf, twoLevels);
  for (auto [W, L] : {std::pair{1, 1}, {2, 1}, {2, 2}, {4, 2}, {6, 3}, {6, 2}, {8, 4}, {8, 2}, {8, 8}, {8, 1}})
    for (size_t count : {0, 1, 1000}) testNodes(W, L, count);
  for (int W : {1, 3, 5}) testOrder(W);
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
