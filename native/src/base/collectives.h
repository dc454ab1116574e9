// The collective surface a backend offers on one lane (one ordered stream of ops). Backends built on a
// Transport get it from TransportCollectives; library backends (MPI, NCCL) implement it with their calls.
// Reductions here see only F32/F64/I32/I64 with Sum/Max/Min: TypedOps adds float16/bfloat16 and "mean".
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/transport.h"

namespace spmd {

class FlightRecorder;

enum class OpKind { AllReduce, ReduceScatter, AllGather, Gather, Broadcast, Reduce, Scatter, AllToAll, AllToAllv, SendRecv, Barrier, Compute };
// Mpi / Nccl / Hccl: the library's own collective (what Auto runs on that backend), whatever algorithm it picks.
// Hierarchical: an allreduce in two levels, inside each host and across hosts (algorithms/collectives.h), where
// the ranks know their hosts and every host holds as many ranks.
// Shared: the shm backend's own algorithms, which reduce and copy straight out of the shared segment.
enum class Algo { Auto, Ring, Tree, Direct, Dissemination, Hierarchical, Shared, Mpi, Nccl, Hccl };

std::string_view algoName(Algo a);
std::string_view opKindName(OpKind k);
// Every name parse accepts, in declaration order: the addon exports them, and error messages list them.
std::vector<std::string_view> algoNames();
std::vector<std::string_view> opKindNames();
bool parseAlgo(std::string_view name, Algo& out);
bool parseOpKind(std::string_view name, OpKind& out);

// all_to_allv on one rank, in elements: the block it sends each rank and where in its input, the block it
// receives from each and where in its output (blocks in rank order both ways).
struct AllToAllvCounts {
  std::vector<size_t> sendCounts, sendOffsets, recvCounts, recvOffsets;
  size_t largestBlock = 0;  // over every pair of ranks: every rank steps through the blocks alike (shm's "shared")

  // Rank r's of a W×W matrix (row-major; entry (i, j): what rank i sends rank j).
  static AllToAllvCounts of(const std::vector<size_t>& matrix, int W, int r);
  size_t sent() const { return sendCounts.empty() ? 0 : sendOffsets.back() + sendCounts.back(); }
  size_t received() const { return recvCounts.empty() ? 0 : recvOffsets.back() + recvCounts.back(); }

  // send(peer, data, bytes) and recv(peer, data, bytes) for every block to or from another rank that holds
  // data: both sides know the matrix, so an empty block is no message at all.
  template <class Send, class Recv>
  void forEachPeer(int me, const void* in, void* out, size_t esize, Send send, Recv recv) const {
    for (size_t j = 0; j < sendCounts.size(); ++j) {
      if (int(j) == me) continue;
      if (sendCounts[j]) send(int(j), static_cast<const char*>(in) + sendOffsets[j] * esize, sendCounts[j] * esize);
      if (recvCounts[j]) recv(int(j), static_cast<char*>(out) + recvOffsets[j] * esize, recvCounts[j] * esize);
    }
  }
};

// A nonblocking op that a lane posted and that completes on that lane's own thread.
class PostedOp {
 public:
  virtual ~PostedOp() = default;
  // Returns once the op completed, or throws as its blocking form would, within the deadline the lane
  // had when the op was posted.
  virtual void wait() = 0;
};

// What postGather returns where the gather ran to completion when posted.
class CompletedOp : public PostedOp {
 public:
  void wait() override {}
};

class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // The algorithm `requested` becomes for a message of `bytes` (Auto resolved by size).
  virtual Algo resolve(OpKind kind, Algo requested, size_t bytes) const = 0;

  virtual void allreduce(const void* in, void* out, size_t count, DType dt, RedOp op, Algo a) = 0;
  virtual void reduceScatter(const void* in, void* out, size_t count, DType dt, RedOp op, Algo a) = 0;
  virtual void allGather(const void* in, void* out, size_t bytes, Algo a) = 0;
  virtual void gather(const void* in, void* out, size_t bytes, int root, Algo a) = 0;
  virtual void broadcast(void* data, size_t bytes, int root, Algo a) = 0;
  virtual void reduce(const void* in, void* out, size_t count, DType dt, RedOp op, int root, Algo a) = 0;
  virtual void scatter(const void* in, void* out, size_t count, size_t esize, int root, Algo a) = 0;
  virtual void allToAll(const void* in, void* out, size_t count, size_t esize, Algo a) = 0;
  // in: c.sent() elements of `esize` bytes; out: c.received(), the blocks from ranks 0..W-1 in rank order.
  virtual void allToAllv(const void* in, void* out, const AllToAllvCounts& c, size_t esize, Algo a) = 0;
  // Sends `bytes` to rank `to` and receives as many from `from`; both this rank: a copy.
  virtual void sendRecv(const void* in, void* out, size_t bytes, int to, int from) = 0;
  // `a`: Auto, or the algorithm the job names (resolve() says which one runs).
  virtual void barrier(Algo a) = 0;
  // Bytes and time per kind of link so far, where the transport has two (the hybrid one); else not split.
  virtual LinkUsage linkUsage() const { return {}; }

  // A gather posted now and completed by wait() on this same thread: how a backend with one lane (MPI
  // granted only MPI_THREAD_FUNNELED, where one thread makes every MPI call) overlaps igather with the
  // ops issued after it. Null where the backend runs nonblocking ops on its second lane instead.
  virtual std::unique_ptr<PostedOp> postGather(const void* /*in*/, void* /*out*/, size_t /*bytes*/, int /*root*/,
                                               Algo /*a*/) {
    return nullptr;
  }

  // A sub-communicator: collective over every rank of this lane, as MPI_Comm_split is. The ranks that pass
  // the same `color` form a group, ranked by (key, rank here), which runs collectives among its members
  // only. It is a view of this lane: it moves data on the lane's connections, so it runs on the lane's
  // thread, and it shares the lane's deadline and abort (setting either on one sets it on both). Every
  // member must issue the group's ops in the same order relative to the lane's own, as for any collective.
  virtual std::unique_ptr<Collectives> split(int color, int key) = 0;

  virtual void setDeadline(Transport::Clock::time_point deadline) = 0;
  // The lane's record of its last ops; the executor writes an entry per op, the backend adds peers.
  virtual FlightRecorder& flight() = 0;
  // Makes every rank's pending and future ops fail fast, naming this rank and the reason.
  virtual void abort(const std::string& reason) = 0;
};

}  // namespace spmd
