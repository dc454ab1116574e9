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
  staged_.clear();
  landing_.clear();
  for (const SendSpec& s : sends) {
    device_.upload(dsend, s.data, s.bytes);
    staged_.push_back({s.peer, dsend, s.bytes});
    dsend += s.bytes;
  }
  for (const RecvSpec& r : recvs) {
    landing_.push_back({r.peer, drecv, r.bytes});
    drecv += r.bytes;
  }
  exchangeOnDevice(staged_, landing_);
  for (size_t i = 0; i < recvs.size(); ++i) device_.download(recvs[i].data, landing_[i].data, recvs[i].bytes);
}

void LibraryTransport::exchangeOnDevice(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs) {
  // Zero-byte entries are left out: both sides of a pair compute the same sizes, so they agree.
  size_t sendBytes = 0, recvBytes = 0;
  sends_.clear();
  recvs_.clear();
  for (const RecvSpec& r : recvs) {
    if (r.bytes) recvs_.push_back(r);
    recvBytes += r.bytes;
  }
  for (const SendSpec& s : sends) {
    if (s.bytes) sends_.push_back(s);
    sendBytes += s.bytes;
  }
  if (sends_.empty() && recvs_.empty()) return;
  comm_.check(comm_.lib().exchange(sends_, recvs_, comm_.get(), device_.stream()), Call::SendRecv);
  device_.issued();
  comm_.wait(device_, deadline(),
             std::string("waiting for ") + comm_.lib().call(Call::SendRecv) + " of " + std::to_string(sendBytes) + "/" + std::to_string(recvBytes) + " bytes");
}

}  // namespace spmd::library
