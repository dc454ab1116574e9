#include "backends/hybrid/hybrid_transport.h"

#include <chrono>
#include <exception>

#include "runtime/flight_recorder.h"

namespace spmd {
namespace {

// The error to report when both halves failed: not the one that only says it was interrupted.
std::exception_ptr cause(std::exception_ptr a, std::exception_ptr b) {
  if (!a) return b;
  if (!b) return a;
  try {
    std::rethrow_exception(a);
  } catch (const Interrupted&) {
    return b;
  } catch (...) {
    return a;
  }
}

uint64_t bytesOf(std::span<const SendSpec> sends) {
  uint64_t n = 0;
  for (const SendSpec& s : sends) n += s.bytes;
  return n;
}

double microsSince(Transport::Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Transport::Clock::now() - t0).count();
}

}  // namespace

void HybridTransport::local() {
  const auto t0 = Clock::now();
  local_.exchange(localSends_, localRecvs_);
  usage_.shmUs += microsSince(t0);
  usage_.shmBytes += bytesOf(localSends_);
}

void HybridTransport::remote() {
  const auto t0 = Clock::now();
  remote_.exchange(remoteSends_, remoteRecvs_);
  usage_.tcpUs += microsSince(t0);
  usage_.tcpBytes += bytesOf(remoteSends_);
}

HybridTransport::HybridTransport(int rank, std::vector<int> localIndex, InterruptibleTransport& local,
                                 InterruptibleTransport& remote)
    : rank_(rank), localIndex_(std::move(localIndex)), local_(local), remote_(remote) {}

void HybridTransport::exchange(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs) {
  // Noted here, by job rank: the halves have no recorder of their own.
  if (flight_) flight_->notePeers(sends, recvs);
  localSends_.clear();
  remoteSends_.clear();
  localRecvs_.clear();
  remoteRecvs_.clear();
  auto isLocal = [&](int peer) { return peer >= 0 && size_t(peer) < localIndex_.size() && localIndex_[size_t(peer)] >= 0; };
  for (const SendSpec& s : sends) {
    if (isLocal(s.peer)) localSends_.push_back({localIndex_[size_t(s.peer)], s.data, s.bytes});
    else remoteSends_.push_back(s);
  }
  for (const RecvSpec& r : recvs) {
    if (isLocal(r.peer)) localRecvs_.push_back({localIndex_[size_t(r.peer)], r.data, r.bytes});
    else remoteRecvs_.push_back(r);
  }
  local_.setDeadline(deadline_);
  remote_.setDeadline(deadline_);
  if (localSends_.empty() && localRecvs_.empty()) return remote();
  if (remoteSends_.empty() && remoteRecvs_.empty()) return local();

  uint64_t ticket = helper_.post([this] {
    try {
      local();
    } catch (...) {
      remote_.interrupt();
      throw;
    }
  });
  std::exception_ptr remoteError, localError;
  try {
    remote();
  } catch (...) {
    remoteError = std::current_exception();
    local_.interrupt();
  }
  try {
    helper_.wait(ticket);
  } catch (...) {
    localError = std::current_exception();
  }
  if (std::exception_ptr err = cause(remoteError, localError)) std::rethrow_exception(err);
}

}  // namespace spmd
