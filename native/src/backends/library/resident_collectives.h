// A library lane over device pointers: where the job's tensors and the estimating ops' buffers live, so
// nothing is staged. The library's own collectives take the pointers as they are, and so do the ops the
// vendors offer as grouped sends and receives (all_to_all, send_recv, and gather and scatter as direct
// exchanges, with the own block a device-to-device copy). The runner's named algorithms reduce and copy on
// the host: they run on the lane over host pointers, through host copies of their buffers, which their
// time then includes.
#pragma once
#include <memory>
#include <vector>

#include "backends/library/library_collectives.h"
#include "base/workspace.h"

namespace spmd::library {

class ResidentCollectives : public Collectives {
 public:
  explicit ResidentCollectives(LibraryCollectives& lane) : lane_(lane), scratch_(lane.device()) {}
  // A sub-communicator's, which owns its lane.
  explicit ResidentCollectives(std::unique_ptr<LibraryCollectives> owned)
      : owned_(std::move(owned)), lane_(*owned_), scratch_(lane_.device()) {}
  int rank() const override { return lane_.rank(); }
  int size() const override { return lane_.size(); }
  // As the lane's, but gather and scatter are direct exchanges under Auto, and all_to_allv is the library's
  // where it has one.
  Algo resolve(OpKind kind, Algo requested, size_t bytes) const override;

  void allreduce(const void* in, void* out, size_t count, DType dt, RedOp op, Algo a) override;
  void reduceScatter(const void* in, void* out, size_t count, DType dt, RedOp op, Algo a) override;
  void allGather(const void* in, void* out, size_t bytes, Algo a) override;
  void gather(const void* in, void* out, size_t bytes, int root, Algo a) override;
  void broadcast(void* data, size_t bytes, int root, Algo a) override;
  void reduce(const void* in, void* out, size_t count, DType dt, RedOp op, int root, Algo a) override;
  void scatter(const void* in, void* out, size_t count, size_t esize, int root, Algo a) override;
  void allToAll(const void* in, void* out, size_t count, size_t esize, Algo a) override;
  // The vendor's own call where it has one (HcclAlltoAllV), else one group of sends and receives.
  void allToAllv(const void* in, void* out, const AllToAllvCounts& c, size_t esize, Algo a) override;
  void sendRecv(const void* in, void* out, size_t bytes, int to, int from) override;
  void barrier(Algo a) override { lane_.barrier(a); }
  std::unique_ptr<Collectives> split(int color, int key) override;
  std::unique_ptr<PostedOp> postGather(const void* in, void* out, size_t bytes, int root, Algo a) override;

  void setDeadline(Transport::Clock::time_point d) override { lane_.setDeadline(d); }
  FlightRecorder& flight() override { return lane_.flight(); }
  void abort(const std::string& reason) override { lane_.abort(reason); }

 private:
  // Runs `run(hostIn, hostOut)` on host copies of `in` (inBytes) and `out` (outBytes; null for none; one
  // copy where out is in).
  template <class Run>
  void onHost(const void* in, size_t inBytes, void* out, size_t outBytes, Run run);
  // One group of sends and receives of device buffers, with `self` (bytes from `from` to `to`) copied
  // on the device first.
  void exchange(const void* from, void* to, size_t self);

  std::unique_ptr<LibraryCollectives> owned_;
  LibraryCollectives& lane_;
  Scratch scratch_;  // device memory: a reduce_scatter's padded input or short block
  Workspace hostIn_, hostOut_;
  std::vector<SendSpec> sends_;
  std::vector<RecvSpec> recvs_;
};

}  // namespace spmd::library
