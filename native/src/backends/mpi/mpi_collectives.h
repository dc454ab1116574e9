// One lane of the MPI backend. Auto runs the MPI library's own collective: the blocking call on the lane's
// thread, as an MPI program runs it, with the Watchdog holding its deadline and, where ranks share cores
// (8 on 2), making a long wait nap so that it leaves the core to the ranks with work (MPI's blocking calls
// spin). igather is posted nonblocking and completed by MPI_Wait: overlap is its point. A job that names
// ring, tree or direct gets the shared algorithm over MpiTransport, so the same algorithm can be compared
// across backends.
#pragma once
#include <memory>
#include <vector>

#include "backends/mpi/mpi_transport.h"
#include "backends/mpi/watchdog.h"
#include "runtime/transport_collectives.h"

namespace spmd::mpi {

class MpiCollectives : public Collectives {
 public:
  // `comm`: lane `lane`'s own communicator (a lane's ops may run beside the other lane's). `cpu`: where
  // the lane's thread binds itself at its first call (laneCpu; -1 for nowhere).
  MpiCollectives(int lane, Comm comm, Faults& faults, Watchdog& watchdog, bool oversubscribed, int cpu);
  int rank() const override { return rank_; }
  int size() const override { return size_; }
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
  // MPI_Comm_split of this lane's communicator: the group runs MPI's collectives among its members.
  std::unique_ptr<Collectives> split(int color, int key) override;
  std::unique_ptr<PostedOp> postGather(const void* in, void* out, size_t bytes, int root, Algo a) override;

  void setDeadline(Transport::Clock::time_point d) override;
  void abort(const std::string& reason) override { faults_.abort(reason); }
  // The lane's: the named algorithms' recorder serves the library's collectives and the lane's splits too.
  FlightRecorder& flight() override { return *flight_; }

 private:
  using Deadline = std::shared_ptr<Transport::Clock::time_point>;
  // A lane's split: shares the lane's deadline cell, so the deadline the executor sets on the lane holds,
  // and records into the lane's recorder (`laneFlight`; null for a lane itself).
  MpiCollectives(int lane, Comm comm, Faults& faults, Watchdog& watchdog, bool oversubscribed, Deadline deadline,
                 FlightRecorder* laneFlight, int cpu);
  class PostedRequest;
  // The shared algorithms, their deadline brought up to date (a split's may have changed on its lane).
  TransportCollectives& algorithms();
  bool library(OpKind kind, Algo a, size_t bytes) const { return resolve(kind, a, bytes) == Algo::Mpi; }
  // Runs `mpiCall` (the library's blocking `call`, moving `bytes`) under the watchdog; an abort noticed
  // before it starts ends the op here instead.
  template <typename MpiCall>
  void blocking(const char* call, size_t bytes, MpiCall&& mpiCall);
  // A collective over every rank of the communicator: blocking(call, bytes, mpiCall), recorded as waiting
  // on all peers.
  template <typename MpiCall>
  void collective(const char* call, size_t bytes, MpiCall&& mpiCall);
  int igather(const void* in, void* out, size_t bytes, int root, MPI_Request* req);  // MPI's return code
  // Partition{count, W} as MPI counts and displacements, for the v-variants, in units of which an element
  // holds `unitsPerElement`.
  void partition(size_t count, const char* call, size_t unitsPerElement = 1);
  // MPI_Alltoallv of the counts and displacements the all-to-alls set, in `type`, `bytes` sent in all.
  void alltoallv(const void* in, void* out, MPI_Datatype type, size_t bytes);

  Comm comm_;
  int rank_, size_;
  Faults& faults_;
  Watchdog& watchdog_;
  bool oversubscribed_;  // for the Waiter of this lane's splits
  Waiter waiter_;
  MpiTransport transport_;
  TransportCollectives algorithms_;
  Deadline deadline_;
  int lane_;
  FlightRecorder* flight_;
  int cpu_;  // laneCpu's CPU until the lane's thread has bound itself there, then -1
  std::vector<int> counts_, displs_, recvCounts_, recvDispls_;  // read by MPI until the request completes
  std::vector<uint8_t> staged_;  // an in-place all-to-all's input, which MPI sends from
};

}  // namespace spmd::mpi
