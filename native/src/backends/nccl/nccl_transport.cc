#include "backends/nccl/nccl_transport.h"

#include <string>

namespace spmd::nccl {

void NcclTransport::exchange(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs) {
  size_t sendBytes = 0, recvBytes = 0;
  for (const SendSpec& s : sends) sendBytes += s.bytes;
  for (const RecvSpec& r : recvs) recvBytes += r.bytes;
  if (sendBytes + recvBytes == 0) return;
  auto* dsend = static_cast<char*>(sendBuf_.get(sendBytes));
  auto* drecv = static_cast<char*>(recvBuf_.get(recvBytes));
  size_t at = 0;
  for (const SendSpec& s : sends) {
    device_.toDevice(dsend + at, s.data, s.bytes);
    at += s.bytes;
  }
  const Api& api = comm_.api();
  ncclComm_t c = comm_.get();
  comm_.check(api.groupStart(), "ncclGroupStart");
  at = 0;
  for (const RecvSpec& r : recvs) {
    if (r.bytes) comm_.check(api.recv(drecv + at, r.bytes, ncclInt8, r.peer, c, device_.stream()), "ncclRecv");
    at += r.bytes;
  }
  at = 0;
  for (const SendSpec& s : sends) {
    if (s.bytes) comm_.check(api.send(dsend + at, s.bytes, ncclInt8, s.peer, c, device_.stream()), "ncclSend");
    at += s.bytes;
  }
  comm_.check(api.groupEnd(), "ncclGroupEnd");
  comm_.wait(device_, deadline_,
             "waiting for ncclSend/ncclRecv of " + std::to_string(sendBytes) + "/" + std::to_string(recvBytes) + " bytes");
  at = 0;
  for (const RecvSpec& r : recvs) {
    device_.toHost(r.data, drecv + at, r.bytes);
    at += r.bytes;
  }
}

}  // namespace spmd::nccl
