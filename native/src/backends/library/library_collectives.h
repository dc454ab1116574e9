// A lane of a vendor library backend (nccl, hccl), over host pointers: each op stages its buffers
// through device memory (reporting exchanges, the error measurements' exact results; the job's tensors go to
// the lane over device pointers, resident_collectives.h). Auto runs the library's own collective where it
// has one (allreduce, reduce_scatter, all_gather, broadcast, reduce; barrier as a 1-element allreduce); a
// named algorithm, and the ops the vendors have only as grouped sends and receives, run the shared
// algorithms over LibraryTransport.
#pragma once
#include <memory>

#include "backends/library/library_transport.h"
#include "runtime/transport_collectives.h"

namespace spmd::library {

class LibraryCollectives : public Collectives {
 public:
  LibraryCollectives(Comm& comm, Device& device, int rank, int size);
  // A sub-communicator split from `lane`, with which it shares the device, the deadline, the flight
  // record and the abort; it owns `comm`.
  LibraryCollectives(std::unique_ptr<Comm> comm, LibraryCollectives& lane, int rank, int size);
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
  // The library's own split (ncclCommSplit); kUnsupported where it has none.
  std::unique_ptr<Collectives> split(int color, int key) override { return splitLane(color, key); }
  std::unique_ptr<LibraryCollectives> splitLane(int color, int key);
  // Where the backend has one lane (hccl): igather runs when posted (the vendors have no gather of their own
  // to overlap). On more lanes it runs on its stream's lane instead.
  std::unique_ptr<PostedOp> postGather(const void* in, void* out, size_t bytes, int root, Algo a) override;

  void setDeadline(Transport::Clock::time_point d) override { transport_.setDeadline(d); }
  // The executor records every op of this lane here, library calls and sub-communicators' included.
  FlightRecorder& flight() override { return lane_ ? lane_->flight() : algorithms_.flight(); }
  void abort(const std::string& reason) override { comm_.abort(reason); }

  // What the lane over device pointers shares.
  Comm& comm() { return comm_; }
  Device& device() { return device_; }
  Library& lib() { return lib_; }
  LibraryTransport& transport() { return transport_; }
  bool onLibrary(OpKind kind, Algo a, size_t bytes) const { return resolve(kind, a, bytes) == lib_.algo(); }
  // Checks what issuing `c` returned and waits for it.
  void complete(int result, Call c, size_t bytes);

 private:
  std::unique_ptr<Comm> ownedComm_;  // a sub-communicator's
  LibraryCollectives* lane_ = nullptr;  // the lane a sub-communicator was split from
  Comm& comm_;
  Device& device_;
  int rank_, size_;
  Library& lib_;
  LibraryTransport transport_;
  TransportCollectives algorithms_;
  Scratch in_, out_;
};

}  // namespace spmd::library
