// Point-to-point over a vendor library: each exchange is one group of sends and receives (ncclSend/
// ncclRecv in a group, HcclBatchSendRecv). As a Transport it takes host buffers and stages them through
// device buffers, for the shared algorithms (the algorithms a job names, which reduce and copy on the
// host); exchangeOnDevice takes device buffers as they are, for the lane over device memory.
#pragma once
#include <vector>

#include "backends/library/library_comm.h"
#include "base/transport.h"

namespace spmd::library {

class LibraryTransport : public Transport {
 public:
  // `lane`: for a sub-communicator, the transport of the lane it was split from, whose deadline it shares.
  LibraryTransport(Comm& comm, Device& device, int rank, int size, LibraryTransport* lane = nullptr)
      : comm_(comm), device_(device), rank_(rank), size_(size), lane_(lane), sendBuf_(device), recvBuf_(device) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void exchange(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs) override;
  // One group of every send and receive of device buffers; returns once it completed.
  void exchangeOnDevice(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs);
  void setDeadline(Clock::time_point d) override {
    if (lane_) return lane_->setDeadline(d);
    deadline_ = d;
  }
  Clock::time_point deadline() const { return lane_ ? lane_->deadline() : deadline_; }

 private:
  Comm& comm_;
  Device& device_;
  int rank_, size_;
  LibraryTransport* lane_;
  Scratch sendBuf_, recvBuf_;
  std::vector<SendSpec> staged_, sends_;  // reused: the device-side entries
  std::vector<RecvSpec> landing_, recvs_;
};

}  // namespace spmd::library
