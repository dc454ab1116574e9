// Transport over MPI point-to-point (MPI_Irecv/MPI_Isend, then the Waiter): the shared ring, tree and
// direct algorithms run on it when a job asks for one of them by name.
#pragma once
#include <vector>

#include "backends/mpi/waiter.h"
#include "base/transport.h"

namespace spmd::mpi {

class MpiTransport : public Transport {
 public:
  // `comm` is the lane's communicator; point-to-point messages never match its collectives.
  MpiTransport(MPI_Comm comm, int rank, int size, Waiter& waiter) : comm_(comm), rank_(rank), size_(size), waiter_(waiter) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void exchange(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs) override;

 private:
  struct Message {
    int peer;
    size_t bytes;  // the whole message, for the error text
    bool recv;
  };
  void post(const Message& m, void* data);

  MPI_Comm comm_;
  int rank_, size_;
  Waiter& waiter_;
  std::vector<MPI_Request> reqs_;  // reused across exchanges: no allocation once warm
  std::vector<Message> messages_;  // per request
};

}  // namespace spmd::mpi
