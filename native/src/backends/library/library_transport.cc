#include "backends/library/library_transport.h"

#include <string>

namespace spmd::library {

void LibraryTransport::exchange(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs) {
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
  // Zero-byte entries are left out: both sides of a pair compute the same sizes, so they agree.
  sends_.clear();
  recvs_.clear();
  at = 0;
  for (const RecvSpec& r : recvs) {
    if (r.bytes) recvs_.push_back({r.peer, drecv + at, r.bytes});
    at += r.bytes;
  }
  at = 0;
  for (const SendSpec& s : sends) {
    if (s.bytes) sends_.push_back({s.peer, dsend + at, s.bytes});
    at += s.bytes;
  }
  comm_.check(comm_.lib().exchange(sends_, recvs_, comm_.get(), device_.stream()), Call::SendRecv);
  device_.issued();
  comm_.wait(device_, deadline_,
             std::string("waiting for ") + comm_.lib().call(Call::SendRecv) + " of " + std::to_string(sendBytes) + "/" + std::to_string(recvBytes) + " bytes");
  at = 0;
  for (const RecvSpec& r : recvs) {
    device_.toHost(r.data, drecv + at, r.bytes);
    at += r.bytes;
  }
}

}  // namespace spmd::library
