// Point-to-point over a vendor library: each exchange is one group of sends and receives (ncclSend/
// ncclRecv in a group, HcclBatchSendRecv), staged through device buffers. The shared algorithms run on it
// (the algorithms a job names), and so do gather, scatter, all_to_all and send_recv, which the vendors
// offer only as grouped sends and receives.
#pragma once
#include "backends/library/library_comm.h"
#include <vector>

#include "core/transport.h"

namespace spmd::library {

class LibraryTransport : public Transport {
 public:
  LibraryTransport(Comm& comm, Device& device, int rank, int size)
      : comm_(comm), device_(device), rank_(rank), size_(size), sendBuf_(device), recvBuf_(device) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void exchange(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs) override;
  Clock::time_point deadline() const { return deadline_; }

 private:
  Comm& comm_;
  Device& device_;
  int rank_, size_;
  DeviceBuffer sendBuf_, recvBuf_;
  std::vector<SendSpec> sends_;  // the device-side entries, reused
  std::vector<RecvSpec> recvs_;
};

}  // namespace spmd::library
