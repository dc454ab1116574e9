#include "backends/mpi/mpi_collectives.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "base/cores.h"
#include "base/partition.h"

namespace spmd::mpi {
MpiCollectives::MpiCollectives(int lane, Comm comm, Faults& faults, Watchdog& watchdog, bool oversubscribed, int cpu)
    : MpiCollectives(lane, std::move(comm), faults, watchdog, oversubscribed,
                     std::make_shared<Transport::Clock::time_point>(Transport::Clock::time_point::max()), nullptr, cpu) {}

MpiCollectives::MpiCollectives(int lane, Comm comm, Faults& faults, Watchdog& watchdog, bool oversubscribed, Deadline deadline,
                               FlightRecorder* laneFlight, int cpu)
    : comm_(std::move(comm)),
      rank_(comm_.rank()),
      size_(comm_.size()),
      faults_(faults),
      watchdog_(watchdog),
      oversubscribed_(oversubscribed),
      waiter_(faults, oversubscribed),
      transport_(comm_.get(), rank_, size_, waiter_),
      algorithms_(transport_, [&faults](const std::string& why) { faults.abort(why); }),
      deadline_(std::move(deadline)),
      lane_(lane),
      flight_(laneFlight ? laneFlight : &algorithms_.flight()),
      cpu_(cpu) {
  // A split records into its lane's recorder: its ops are part of the lane's op in progress.
  transport_.setRecorder(flight_);
  waiter_.watch(lane, flight_);
  if (!laneFlight) flight_->mirrorTo(&faults.rollCall().presence(lane));
}

Algo MpiCollectives::resolve(OpKind kind, Algo requested, size_t bytes) const {
  switch (kind) {
    case OpKind::Compute: return Algo::Auto;
    // These take no algorithm: the library always runs them.
    case OpKind::AllToAll: case OpKind::SendRecv: case OpKind::Barrier: return Algo::Mpi;
    default: return requested == Algo::Auto || requested == Algo::Mpi ? Algo::Mpi : algorithms_.resolve(kind, requested, bytes);
  }
}

void MpiCollectives::setDeadline(Transport::Clock::time_point d) { *deadline_ = d; }

TransportCollectives& MpiCollectives::algorithms() {
  algorithms_.setDeadline(*deadline_);
  return algorithms_;
}

template <typename MpiCall>
void MpiCollectives::blocking(const char* call, size_t bytes, MpiCall&& mpiCall) {
  // Another rank gave up while this one was between ops: the op would wait for it forever.
  if (faults_.noticed()) throw CommError(code::kAborted, faults_.reason());
  if (cpu_ >= 0) pinThisThread(unsigned(std::exchange(cpu_, -1)));
  const Watchdog::Inside inside = watchdog_.enter(lane_, call, bytes, *deadline_, flight());
  check(mpiCall(), call);
}

template <typename MpiCall>
void MpiCollectives::collective(const char* call, size_t bytes, MpiCall&& mpiCall) {
  flight().noteAllPeers();
  blocking(call, bytes, std::forward<MpiCall>(mpiCall));
}

void MpiCollectives::partition(size_t count, const char* call, size_t unitsPerElement) {
  const Partition part{count, size_};
  counts_.resize(size_t(size_));
  displs_.resize(size_t(size_));
  mpi::count(count * unitsPerElement, call);  // every offset below fits once the total does
  for (int j = 0; j < size_; ++j) {
    counts_[size_t(j)] = int(part.count(j) * unitsPerElement);
    displs_[size_t(j)] = int(part.offset(j) * unitsPerElement);
  }
}

void MpiCollectives::allreduce(const void* in, void* out, size_t count, DType dt, RedOp op, Algo a) {
  const size_t bytes = count * elementSize(dt);
  if (!library(OpKind::AllReduce, a, bytes)) return algorithms().allreduce(in, out, count, dt, op, a);
  const int n = mpi::count(count, "MPI_Allreduce");
  const void* send = in == out ? MPI_IN_PLACE : in;
  collective(
      "MPI_Allreduce", bytes, [&] { return MPI_Allreduce(send, out, n, reductionType(dt), reductionOp(op), comm_.get()); });
}

void MpiCollectives::reduceScatter(const void* in, void* out, size_t count, DType dt, RedOp op, Algo a) {
  const size_t bytes = count * elementSize(dt);
  if (!library(OpKind::ReduceScatter, a, bytes)) return algorithms().reduceScatter(in, out, count, dt, op, a);
  if (count % size_t(size_) == 0) {  // equal blocks: the simpler call, which libraries tune best
    const int block = mpi::count(count / size_t(size_), "MPI_Reduce_scatter_block");
    return collective(
        "MPI_Reduce_scatter_block", bytes,
        [&] { return MPI_Reduce_scatter_block(in, out, block, reductionType(dt), reductionOp(op), comm_.get()); });
  }
  partition(count, "MPI_Reduce_scatter");
  collective(
      "MPI_Reduce_scatter", bytes,
      [&] { return MPI_Reduce_scatter(in, out, counts_.data(), reductionType(dt), reductionOp(op), comm_.get()); });
}

void MpiCollectives::allGather(const void* in, void* out, size_t bytes, Algo a) {
  if (!library(OpKind::AllGather, a, bytes * size_t(size_))) return algorithms().allGather(in, out, bytes, a);
  const Units u = units(bytes, "MPI_Allgather");
  collective(
      "MPI_Allgather", bytes * size_t(size_), [&] { return MPI_Allgather(in, u.count, u.type, out, u.count, u.type, comm_.get()); });
}

void MpiCollectives::gather(const void* in, void* out, size_t bytes, int root, Algo a) {
  if (!library(OpKind::Gather, a, bytes * size_t(size_))) return algorithms().gather(in, out, bytes, root, a);
  const Units u = units(bytes, "MPI_Gather");
  collective(
      "MPI_Gather", bytes * size_t(size_), [&] { return MPI_Gather(in, u.count, u.type, out, u.count, u.type, root, comm_.get()); });
}

int MpiCollectives::igather(const void* in, void* out, size_t bytes, int root, MPI_Request* req) {
  Units u = units(bytes, "MPI_Igather");
  return MPI_Igather(in, u.count, u.type, out, u.count, u.type, root, comm_.get(), req);
}

// An MPI_Igather in flight: completed by wait() (as the lane completes its collectives: MPI_Wait under the
// watchdog, or the Waiter's polls where cores are shared), or stranded if it is dropped first (an earlier
// op failed).
class MpiCollectives::PostedRequest : public PostedOp {
 public:
  PostedRequest(MpiCollectives& lane, Transport::Clock::time_point deadline, size_t bytes)
      : lane_(lane), deadline_(deadline), bytes_(bytes) {}
  ~PostedRequest() override { lane_.waiter_.settle({&req_, 1}); }
  void wait() override {
    // Recorded as all peers when posted (postGather), like every library collective.
    const Watchdog::Inside inside = lane_.watchdog_.enter(lane_.lane_, "MPI_Igather", bytes_, deadline_, lane_.flight());
    check(MPI_Wait(&req_, MPI_STATUS_IGNORE), "MPI_Wait (MPI_Igather)");
  }
  MPI_Request req_ = MPI_REQUEST_NULL;

 private:
  MpiCollectives& lane_;
  Transport::Clock::time_point deadline_;
  size_t bytes_;
};

std::unique_ptr<PostedOp> MpiCollectives::postGather(const void* in, void* out, size_t bytes, int root, Algo a) {
  if (!library(OpKind::Gather, a, bytes * size_t(size_))) {
    algorithms().gather(in, out, bytes, root, a);
    return std::make_unique<CompletedOp>();
  }
  auto posted = std::make_unique<PostedRequest>(*this, *deadline_, bytes * size_t(size_));
  flight().noteAllPeers();
  check(igather(in, out, bytes, root, &posted->req_), "MPI_Igather");
  return posted;
}

void MpiCollectives::broadcast(void* data, size_t bytes, int root, Algo a) {
  if (!library(OpKind::Broadcast, a, bytes)) return algorithms().broadcast(data, bytes, root, a);
  const Units u = units(bytes, "MPI_Bcast");
  collective(
      "MPI_Bcast", bytes, [&] { return MPI_Bcast(data, u.count, u.type, root, comm_.get()); });
}

void MpiCollectives::reduce(const void* in, void* out, size_t count, DType dt, RedOp op, int root, Algo a) {
  const size_t bytes = count * elementSize(dt);
  if (!library(OpKind::Reduce, a, bytes)) return algorithms().reduce(in, out, count, dt, op, root, a);
  const void* send = rank_ == root && in == out ? MPI_IN_PLACE : in;
  const int n = mpi::count(count, "MPI_Reduce");
  collective(
      "MPI_Reduce", bytes, [&] { return MPI_Reduce(send, out, n, reductionType(dt), reductionOp(op), root, comm_.get()); });
}

void MpiCollectives::scatter(const void* in, void* out, size_t count, size_t esize, int root, Algo a) {
  if (!library(OpKind::Scatter, a, count * esize)) return algorithms().scatter(in, out, count, esize, root, a);
  const Units u = units(esize, "MPI_Scatterv");
  partition(count, "MPI_Scatterv", size_t(u.count));
  const int mine = counts_[size_t(rank_)];
  collective(
      "MPI_Scatterv", count * esize,
      [&] { return MPI_Scatterv(in, counts_.data(), displs_.data(), u.type, out, mine, u.type, root, comm_.get()); });
}

void MpiCollectives::allToAll(const void* in, void* out, size_t count, size_t esize, Algo /*a*/) {
  // Block j of the input goes to rank j; every rank sends this rank its block r, so each arrives with
  // this rank's block length, rank-major. Elements travel as the units units() picks for one element, so
  // elements of any size work (the estimating ops exchange records of hundreds of bytes).
  const Units u = units(esize, "MPI_Alltoallv");
  // Equal blocks, not in place: MPI_Alltoall, which has algorithms for small blocks that MPI_Alltoallv
  // lacks (Open MPI 4.1, 16 B at W = 4 on 2 cores: 10.8 µs through MPI_Alltoallv, 6.6 through MPI_Alltoall).
  if (count % size_t(size_) == 0 && in != out) {
    const int block = mpi::count(count / size_t(size_) * size_t(u.count), "MPI_Alltoall");
    collective("MPI_Alltoall", count * esize, [&] { return MPI_Alltoall(in, block, u.type, out, block, u.type, comm_.get()); });
    return;
  }
  partition(count, "MPI_Alltoallv", size_t(u.count));
  const int mine = counts_[size_t(rank_)];
  mpi::count(size_t(mine) * size_t(size_), "MPI_Alltoallv");
  recvCounts_.assign(size_t(size_), mine);
  recvDispls_.resize(size_t(size_));
  for (int j = 0; j < size_; ++j) recvDispls_[size_t(j)] = j * mine;
  alltoallv(in, out, u.type, count * esize);
}

void MpiCollectives::allToAllv(const void* in, void* out, const AllToAllvCounts& c, size_t esize, Algo a) {
  if (!library(OpKind::AllToAllv, a, c.sent() * esize)) return algorithms().allToAllv(in, out, c, esize, a);
  const Units u = units(esize, "MPI_Alltoallv");
  // Every offset fits once the totals do (validation refuses larger matrices for this backend first).
  mpi::count(std::max(c.sent(), c.received()) * size_t(u.count), "MPI_Alltoallv");
  const auto ints = [&](const std::vector<size_t>& from, std::vector<int>& to) {
    to.resize(from.size());
    for (size_t j = 0; j < from.size(); ++j) to[j] = int(from[j] * size_t(u.count));
  };
  ints(c.sendCounts, counts_);
  ints(c.sendOffsets, displs_);
  ints(c.recvCounts, recvCounts_);
  ints(c.recvOffsets, recvDispls_);
  alltoallv(in, out, u.type, c.sent() * esize);
}

/** Both all-to-alls, with the counts and displacements already in counts_, displs_, recvCounts_ and recvDispls_. */
void MpiCollectives::alltoallv(const void* in, void* out, MPI_Datatype type, size_t bytes) {
  if (in == out) {  // MPI may not read from the buffer it writes: send from a copy of the input
    int typeBytes = 0;
    check(MPI_Type_size(type, &typeBytes), "MPI_Type_size");
    size_t extent = 0;
    for (int j = 0; j < size_; ++j) extent = std::max(extent, size_t(displs_[size_t(j)]) + size_t(counts_[size_t(j)]));
    const auto* from = static_cast<const uint8_t*>(in);
    staged_.assign(from, from + extent * size_t(typeBytes));
    in = staged_.data();
  }
  const int *sc = counts_.data(), *sd = displs_.data(), *rc = recvCounts_.data(), *rd = recvDispls_.data();
  collective(
      "MPI_Alltoallv", bytes, [&] { return MPI_Alltoallv(in, sc, sd, type, out, rc, rd, type, comm_.get()); });
}

void MpiCollectives::sendRecv(const void* in, void* out, size_t bytes, int to, int from) {
  if (to == rank_ && from == rank_) {
    if (bytes) std::memcpy(out, in, bytes);
    return;
  }
  const Units u = units(bytes, "MPI_Sendrecv");
  const SendSpec send{to, in, bytes};
  const RecvSpec recv{from, out, bytes};
  flight().notePeers({&send, 1}, {&recv, 1});
  blocking("MPI_Sendrecv", bytes, [&] {
    return MPI_Sendrecv(in, u.count, u.type, to, 0, out, u.count, u.type, from, 0, comm_.get(), MPI_STATUS_IGNORE);
  });
}

std::unique_ptr<Collectives> MpiCollectives::split(int color, int key) {
  // MPI_Comm_split blocks with no deadline or abort to end it. The barrier before it has both, and once it
  // completes every rank is alive and about to split.
  barrier(Algo::Auto);
  return std::unique_ptr<Collectives>(
      new MpiCollectives(lane_, Comm::split(comm_.get(), color, key), faults_, watchdog_, oversubscribed_, deadline_, flight_, -1));
}

void MpiCollectives::barrier(Algo) {
  collective(
      "MPI_Barrier", 0, [&] { return MPI_Barrier(comm_.get()); });
}

}  // namespace spmd::mpi
