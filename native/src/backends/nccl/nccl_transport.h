// Point-to-point over NCCL: each exchange is one group of ncclSend/ncclRecv, staged through device
// buffers. The shared algorithms run on it (the algorithms a job names), and so do gather, scatter,
// all_to_all and send_recv, which NCCL offers only as grouped sends and receives.
#pragma once
#include "backends/nccl/nccl_comm.h"
#include "core/transport.h"

namespace spmd::nccl {

class NcclTransport : public Transport {
 public:
  NcclTransport(Comm& comm, Device& device, int rank, int size)
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
};

}  // namespace spmd::nccl
