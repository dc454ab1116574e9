#include "backends/mpi/mpi_collectives.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/partition.h"

namespace spmd::mpi {
namespace {

std::string waitingFor(const char* call, size_t bytes) {
  return std::string("waiting for ") + call + " of " + std::to_string(bytes) + " bytes";
}

}  // namespace

MpiCollectives::MpiCollectives(int lane, Comm comm, Faults& faults, bool oversubscribed)
    : MpiCollectives(lane, std::move(comm), faults, oversubscribed,
                     std::make_shared<Transport::Clock::time_point>(Transport::Clock::time_point::max()), nullptr) {}

MpiCollectives::MpiCollectives(int lane, Comm comm, Faults& faults, bool oversubscribed, Deadline deadline,
                               FlightRecorder* laneFlight)
    : comm_(std::move(comm)),
      rank_(comm_.rank()),
      size_(comm_.size()),
      faults_(faults),
      oversubscribed_(oversubscribed),
      waiter_(faults, oversubscribed),
      transport_(comm_.get(), rank_, size_, waiter_),
      algorithms_(transport_, [&faults](const std::string& why) { faults.abort(why); }),
      deadline_(std::move(deadline)),
      lane_(lane),
      flight_(laneFlight ? laneFlight : &algorithms_.flight()) {
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

void MpiCollectives::complete(MPI_Request& req, const char* call, size_t bytes) {
  flight().noteAllPeers();
  if (waiter_.poll({&req, 1}, *deadline_)) return;
  waiter_.fail({&req, 1}, waitingFor(call, bytes));
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
  MPI_Request req;
  check(MPI_Iallreduce(in == out ? MPI_IN_PLACE : in, out, mpi::count(count, "MPI_Iallreduce"), reductionType(dt),
                       reductionOp(op), comm_.get(), &req),
        "MPI_Iallreduce");
  complete(req, "MPI_Iallreduce", bytes);
}

void MpiCollectives::reduceScatter(const void* in, void* out, size_t count, DType dt, RedOp op, Algo a) {
  const size_t bytes = count * elementSize(dt);
  if (!library(OpKind::ReduceScatter, a, bytes)) return algorithms().reduceScatter(in, out, count, dt, op, a);
  MPI_Request req;
  if (count % size_t(size_) == 0) {  // equal blocks: the simpler call, which libraries tune best
    check(MPI_Ireduce_scatter_block(in, out, mpi::count(count / size_t(size_), "MPI_Ireduce_scatter_block"),
                                    reductionType(dt), reductionOp(op), comm_.get(), &req),
          "MPI_Ireduce_scatter_block");
    return complete(req, "MPI_Ireduce_scatter_block", bytes);
  }
  partition(count, "MPI_Ireduce_scatter");
  check(MPI_Ireduce_scatter(in, out, counts_.data(), reductionType(dt), reductionOp(op), comm_.get(), &req),
        "MPI_Ireduce_scatter");
  complete(req, "MPI_Ireduce_scatter", bytes);
}

void MpiCollectives::allGather(const void* in, void* out, size_t bytes, Algo a) {
  if (!library(OpKind::AllGather, a, bytes * size_t(size_))) return algorithms().allGather(in, out, bytes, a);
  Units u = units(bytes, "MPI_Iallgather");
  MPI_Request req;
  check(MPI_Iallgather(in, u.count, u.type, out, u.count, u.type, comm_.get(), &req), "MPI_Iallgather");
  complete(req, "MPI_Iallgather", bytes * size_t(size_));
}

void MpiCollectives::gather(const void* in, void* out, size_t bytes, int root, Algo a) {
  if (!library(OpKind::Gather, a, bytes * size_t(size_))) return algorithms().gather(in, out, bytes, root, a);
  MPI_Request req;
  igather(in, out, bytes, root, &req);
  complete(req, "MPI_Igather", bytes * size_t(size_));
}

void MpiCollectives::igather(const void* in, void* out, size_t bytes, int root, MPI_Request* req) {
  Units u = units(bytes, "MPI_Igather");
  check(MPI_Igather(in, u.count, u.type, out, u.count, u.type, root, comm_.get(), req), "MPI_Igather");
}

// An MPI_Igather in flight: completed by wait(), or stranded if it is dropped first (an earlier op failed).
class MpiCollectives::PostedRequest : public PostedOp {
 public:
  PostedRequest(Waiter& waiter, Transport::Clock::time_point deadline, size_t bytes)
      : waiter_(waiter), deadline_(deadline), bytes_(bytes) {}
  ~PostedRequest() override { waiter_.settle({&req_, 1}); }
  void wait() override {
    // Recorded as all peers when posted (postGather), like every library collective.
    if (waiter_.poll({&req_, 1}, deadline_)) return;
    waiter_.fail({&req_, 1}, waitingFor("MPI_Igather", bytes_));
  }
  MPI_Request req_ = MPI_REQUEST_NULL;

 private:
  Waiter& waiter_;
  Transport::Clock::time_point deadline_;
  size_t bytes_;
};

std::unique_ptr<PostedOp> MpiCollectives::postGather(const void* in, void* out, size_t bytes, int root, Algo a) {
  if (!library(OpKind::Gather, a, bytes * size_t(size_))) {
    algorithms().gather(in, out, bytes, root, a);
    return std::make_unique<CompletedOp>();
  }
  auto posted = std::make_unique<PostedRequest>(waiter_, *deadline_, bytes * size_t(size_));
  flight().noteAllPeers();
  igather(in, out, bytes, root, &posted->req_);
  return posted;
}

void MpiCollectives::broadcast(void* data, size_t bytes, int root, Algo a) {
  if (!library(OpKind::Broadcast, a, bytes)) return algorithms().broadcast(data, bytes, root, a);
  Units u = units(bytes, "MPI_Ibcast");
  MPI_Request req;
  check(MPI_Ibcast(data, u.count, u.type, root, comm_.get(), &req), "MPI_Ibcast");
  complete(req, "MPI_Ibcast", bytes);
}

void MpiCollectives::reduce(const void* in, void* out, size_t count, DType dt, RedOp op, int root, Algo a) {
  const size_t bytes = count * elementSize(dt);
  if (!library(OpKind::Reduce, a, bytes)) return algorithms().reduce(in, out, count, dt, op, root, a);
  const void* send = rank_ == root && in == out ? MPI_IN_PLACE : in;
  MPI_Request req;
  check(MPI_Ireduce(send, out, mpi::count(count, "MPI_Ireduce"), reductionType(dt), reductionOp(op), root, comm_.get(), &req),
        "MPI_Ireduce");
  complete(req, "MPI_Ireduce", bytes);
}

void MpiCollectives::scatter(const void* in, void* out, size_t count, size_t esize, int root, Algo a) {
  if (!library(OpKind::Scatter, a, count * esize)) return algorithms().scatter(in, out, count, esize, root, a);
  const Units u = units(esize, "MPI_Iscatterv");
  partition(count, "MPI_Iscatterv", size_t(u.count));
  MPI_Request req;
  check(MPI_Iscatterv(in, counts_.data(), displs_.data(), u.type, out, counts_[size_t(rank_)], u.type, root, comm_.get(), &req),
        "MPI_Iscatterv");
  complete(req, "MPI_Iscatterv", count * esize);
}

void MpiCollectives::allToAll(const void* in, void* out, size_t count, size_t esize, Algo /*a*/) {
  // Block j of the input goes to rank j; every rank sends this rank its block r, so each arrives with
  // this rank's block length, rank-major. Elements travel as the units units() picks for one element, so
  // elements of any size work (the estimating ops exchange records of hundreds of bytes).
  const Units u = units(esize, "MPI_Ialltoallv");
  partition(count, "MPI_Ialltoallv", size_t(u.count));
  const int mine = counts_[size_t(rank_)];
  mpi::count(size_t(mine) * size_t(size_), "MPI_Ialltoallv");
  recvCounts_.assign(size_t(size_), mine);
  recvDispls_.resize(size_t(size_));
  for (int j = 0; j < size_; ++j) recvDispls_[size_t(j)] = j * mine;
  alltoallv(in, out, u.type, count * esize);
}

void MpiCollectives::allToAllv(const void* in, void* out, const AllToAllvCounts& c, size_t esize, Algo a) {
  if (!library(OpKind::AllToAllv, a, c.sent() * esize)) return algorithms().allToAllv(in, out, c, esize, a);
  const Units u = units(esize, "MPI_Ialltoallv");
  // Every offset fits once the totals do (validation refuses larger matrices for this backend first).
  mpi::count(std::max(c.sent(), c.received()) * size_t(u.count), "MPI_Ialltoallv");
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

void MpiCollectives::alltoallv(const void* in, void* out, MPI_Datatype type, size_t bytes) {
  MPI_Request req;
  check(MPI_Ialltoallv(in, counts_.data(), displs_.data(), type, out, recvCounts_.data(), recvDispls_.data(), type, comm_.get(), &req),
        "MPI_Ialltoallv");
  complete(req, "MPI_Ialltoallv", bytes);
}

void MpiCollectives::sendRecv(const void* in, void* out, size_t bytes, int to, int from) {
  // MPI_Sendrecv as its two nonblocking halves, so the Waiter bounds it like every other op.
  if (to == rank_ && from == rank_) {
    if (bytes) std::memcpy(out, in, bytes);
    return;
  }
  Units u = units(bytes, "MPI_Isend");
  MPI_Request reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  check(MPI_Irecv(out, u.count, u.type, from, 0, comm_.get(), &reqs[0]), "MPI_Irecv");
  check(MPI_Isend(in, u.count, u.type, to, 0, comm_.get(), &reqs[1]), "MPI_Isend");
  const SendSpec send{to, in, bytes};
  const RecvSpec recv{from, out, bytes};
  flight().notePeers({&send, 1}, {&recv, 1});
  if (waiter_.poll(reqs, *deadline_)) return;
  waiter_.fail(reqs, "waiting for MPI_Isend/MPI_Irecv (send_recv) of " + std::to_string(bytes) + " bytes",
               [](size_t i) { return i == 0; });
}

std::unique_ptr<Collectives> MpiCollectives::split(int color, int key) {
  // MPI_Comm_split blocks with no deadline or abort to end it. The barrier before it has both, and once it
  // completes every rank is alive and about to split.
  barrier();
  return std::unique_ptr<Collectives>(
      new MpiCollectives(lane_, Comm::split(comm_.get(), color, key), faults_, oversubscribed_, deadline_, flight_));
}

void MpiCollectives::barrier() {
  MPI_Request req;
  check(MPI_Ibarrier(comm_.get(), &req), "MPI_Ibarrier");
  complete(req, "MPI_Ibarrier", 0);
}

}  // namespace spmd::mpi
