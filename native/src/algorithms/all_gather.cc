#include "algorithms/buffers.h"
#include "algorithms/collectives.h"
#include "algorithms/peer_batch.h"
#include "algorithms/phases.h"
#include "algorithms/ranks.h"

namespace spmd::algo {
namespace {

// `data` holds Partition p's block r (elements of `esize` bytes); afterwards it holds every block. (The ring
// allreduce does its own all-gather, sliced and overlapping its reduce-scatter.)
void allGatherBlocksRing(Transport& t, void* data, Partition p, size_t esize) {
  using namespace detail;
  const int W = t.size(), r = t.rank();
  const int right = wrapRank(r + 1, W), left = wrapRank(r - 1, W);
  char* d = bytes(data);
  // Step s forwards the block that arrived in step s-1 (own block first); after W-1 steps every block has
  // travelled the whole ring.
  for (int s = 0; s < W - 1; ++s) {
    const int out = wrapRank(r - s, W), in = wrapRank(r - s - 1, W);
    t.sendRecv(right, d + p.offset(out) * esize, p.count(out) * esize, left, d + p.offset(in) * esize,
               p.count(in) * esize);
  }
}

}  // namespace

namespace detail {

void allGatherBlocksDirect(Transport& t, void* data, Partition p, size_t esize) {
  const int W = t.size(), r = t.rank();
  char* d = bytes(data);
  PeerBatch batch;
  for (int j = 0; j < W; ++j) {
    if (j == r) continue;
    batch.send(j, d + p.offset(r) * esize, p.count(r) * esize);
    batch.recv(j, d + p.offset(j) * esize, p.count(j) * esize);
  }
  batch.run(t);
}

}  // namespace detail

// W equal blocks of `bytes` are the partition of W * bytes single-byte elements.
void allGatherRing(Transport& t, const void* in, void* out, size_t bytes) {
  detail::copyBytes(detail::bytes(out) + size_t(t.rank()) * bytes, in, bytes);
  allGatherBlocksRing(t, out, Partition{size_t(t.size()) * bytes, t.size()}, 1);
}

void allGatherDirect(Transport& t, const void* in, void* out, size_t bytes) {
  detail::copyBytes(detail::bytes(out) + size_t(t.rank()) * bytes, in, bytes);
  detail::allGatherBlocksDirect(t, out, Partition{size_t(t.size()) * bytes, t.size()}, 1);
}

}  // namespace spmd::algo
