#include "backends/tcp/tcp_transport.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "base/error.h"
#include "runtime/flight_recorder.h"

namespace spmd::tcp {
namespace {

constexpr size_t H = kFrameHeaderBytes;
constexpr size_t C = kChunkBytes;
constexpr size_t kFrameBytes = H + C;
// A send hands the kernel at most this many frames at once, so one large message does not keep the other
// peers of the exchange waiting for a whole pass.
constexpr int kFramesPerSend = 4;
// A waiting lane wakes this often to note a sign of life (ShmTransport's sleep slice is 50 ms).
constexpr int64_t kAliveSliceMs = 100;
// A peer that sent an abort header sent its reason in the same write; it gets this long to arrive.
constexpr int kReasonWaitMs = 1000;

size_t chunks(size_t bytes) { return (bytes + C - 1) / C; }
size_t wireBytes(size_t bytes) { return bytes + chunks(bytes) * H; }
// Payload bytes among the first `wire` bytes of a message.
size_t payloadDone(size_t wire) { return wire / kFrameBytes * C + (std::max(wire % kFrameBytes, H) - H); }

bool transient(int e) { return e == EAGAIN || e == EWOULDBLOCK || e == EINTR; }
bool hangup(int e) { return e == EPIPE || e == ECONNRESET || e == ENOTCONN || e == ETIMEDOUT || e == EHOSTUNREACH; }

}  // namespace

TcpTransport::TcpTransport(int rank, int lane, Connector& connector, std::vector<std::string> names, AbortSignal& signal)
    : rank_(rank), lane_(lane), connector_(connector), signal_(signal), sendBusy_(names.size()), recvBusy_(names.size()) {
  wake_ = Fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_) throwSystemError("tcp: eventfd");
  for (std::string& name : names) links_.push_back(Link{Fd(), std::move(name)});
  signal_.watch(wake_.get());
}

// Made on the lane's first wait or connection, on its own thread (the only one that uses it): a lane that
// never talks over tcp costs no epoll descriptor.
int TcpTransport::poller() {
  if (epoll_) return epoll_.get();
  epoll_ = Fd(epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_) throwSystemError("tcp: epoll_create1");
  // The events' data is never read: every wakeup rescans the messages of the exchange.
  epoll_event ev{};
  ev.events = EPOLLIN;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev) != 0) throwSystemError("tcp: epoll_ctl");
  return epoll_.get();
}

// Asks the connector on first use; once the connection is there it joins the epoll set. Edge-triggered
// and registered once: no epoll_ctl on the hot path. exchange() only sleeps after every socket it needs
// said EAGAIN (a socket that arrives is tried before any sleep), so an edge is never missed.
bool TcpTransport::connected(int peer) {
  Link& link = links_[size_t(peer)];
  if (link.fd) return true;
  link.fd = connector_.take(lane_, peer, wake_.get());
  if (!link.fd) return false;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  if (epoll_ctl(poller(), EPOLL_CTL_ADD, link.fd.get(), &ev) != 0) throwSystemError("tcp: epoll_ctl");
  return true;
}

void TcpTransport::interrupt() {
  interrupted_.store(true, std::memory_order_release);
  signalEventFd(wake_.get());
}

void TcpTransport::checkSignals() const {
  if (signal_.raised()) throw CommError(code::kAborted, signal_.describe());
  if (interrupted_.load(std::memory_order_acquire)) throw Interrupted();
}

std::string TcpTransport::describe(const Message& m) const {
  if (!links_[size_t(m.peer)].fd) {
    return std::string(m.recv ? "receiving from" : "sending to") + " rank " + std::to_string(m.peer) + ", not yet connected (" +
           connector_.waitingFor(lane_, m.peer) + ")";
  }
  return std::string(m.recv ? "receiving " : "sending ") + std::to_string(m.bytes) + (m.recv ? " bytes from rank " : " bytes to rank ") +
         std::to_string(m.peer) + " (" + std::to_string(payloadDone(m.wire)) + " done)";
}

void TcpTransport::peerGone(const Message& m, const char* how) {
  throw CommError(code::kPeerGone, "rank " + std::to_string(m.peer) + " (" + links_[size_t(m.peer)].name + ") is gone: " + how +
                                       " while this rank was " + describe(m));
}

size_t TcpTransport::push(Message& m) {
  Link& link = links_[size_t(m.peer)];
  const size_t total = wireBytes(m.bytes);
  uint8_t headers[kFramesPerSend][H];
  iovec iov[2 * kFramesPerSend];
  int n = 0;
  for (size_t pos = m.wire, frame = 0; pos < total && frame < kFramesPerSend; ++frame) {
    const size_t k = pos / kFrameBytes, chunk = std::min(C, m.bytes - k * C);
    size_t at = pos % kFrameBytes;
    if (at < H) {
      encodeFrame(FrameHeader{FrameKind::Data, m.seq, m.bytes, k * C}, headers[frame]);
      iov[n++] = {headers[frame] + at, H - at};
      at = H;
    }
    iov[n++] = {m.data + k * C + (at - H), chunk - (at - H)};
    pos = k * kFrameBytes + H + chunk;
  }
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = size_t(n);
  ssize_t sent = sendmsg(link.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (sent < 0) {
    if (transient(errno)) return 0;
    if (hangup(errno)) peerGone(m, "its connection was reset");
    throwSystemError("tcp: send to rank " + std::to_string(m.peer));
  }
  m.wire += size_t(sent);
  link.midFrame = m.wire < total && m.wire % kFrameBytes != 0;
  return size_t(sent);
}

// Reads at most up to the next header and stops there: a header is checked before any byte behind it is
// written into the caller's buffer, and nothing past the message is read.
size_t TcpTransport::pull(Message& m) {
  const size_t k = m.wire / kFrameBytes, at = m.wire % kFrameBytes, chunk = std::min(C, m.bytes - k * C);
  iovec iov[2];
  int n = 0;
  bool nextHeader = false;
  if (at < H) {
    iov[n++] = {m.header + at, H - at};
  } else {
    iov[n++] = {m.data + k * C + (at - H), chunk - (at - H)};
    if ((k + 1) * C < m.bytes) {
      iov[n++] = {m.header, H};
      nextHeader = true;
    }
  }
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = size_t(n);
  ssize_t got = recvmsg(links_[size_t(m.peer)].fd.get(), &msg, MSG_DONTWAIT);
  if (got == 0) peerGone(m, "it closed the connection");
  if (got < 0) {
    if (transient(errno)) return 0;
    if (hangup(errno)) peerGone(m, "its connection was reset");
    throwSystemError("tcp: receive from rank " + std::to_string(m.peer));
  }
  m.wire += size_t(got);
  if (!nextHeader && at < H && m.wire == k * kFrameBytes + H) checkHeader(m, k);
  if (nextHeader && m.wire == (k + 1) * kFrameBytes + H) checkHeader(m, k + 1);
  return size_t(got);
}

void TcpTransport::checkHeader(const Message& m, size_t chunk) {
  std::optional<FrameHeader> h = decodeFrame(m.header);
  const std::string who = "rank " + std::to_string(m.peer) + " (" + links_[size_t(m.peer)].name + ")";
  if (!h) throw CommError(code::kDesync, "tcp: malformed frame from " + who + " on lane " + std::to_string(lane_) + " while " + describe(m));
  if (h->kind == FrameKind::Abort) abortedByPeer(m.peer, h->total);
  if (h->seq != m.seq || h->total != m.bytes || h->offset != chunk * C) {
    throw CommError(code::kDesync, who + " is out of step with this rank on lane " + std::to_string(lane_) + ": its message #" +
                                       std::to_string(h->seq) + " has " + std::to_string(h->total) + " bytes (chunk at " +
                                       std::to_string(h->offset) + ") where this rank expects message #" + std::to_string(m.seq) +
                                       " of " + std::to_string(m.bytes) + " bytes (chunk at " + std::to_string(chunk * C) + ")");
  }
}

void TcpTransport::abortedByPeer(int peer, uint64_t reasonBytes) {
  std::string reason(std::min<uint64_t>(reasonBytes, kMaxAbortReason), '\0');
  size_t got = 0;
  int fd = links_[size_t(peer)].fd.get();
  while (got < reason.size()) {
    ssize_t n = ::recv(fd, reason.data() + got, reason.size() - got, MSG_DONTWAIT);
    if (n > 0) {
      got += size_t(n);
      continue;
    }
    pollfd p{fd, POLLIN, 0};
    if (n == 0 || !transient(errno) || poll(&p, 1, kReasonWaitMs) <= 0) break;
  }
  reason.resize(got);
  signal_.raise(peer, reason.empty() ? "(no reason given)" : reason);
  throw CommError(code::kAborted, signal_.describe());
}

void TcpTransport::sleep() {
  const Clock::time_point now = Clock::now();
  // Waiting is a sign of life, for this rank's flight record.
  if (lifeSigns_) lifeSigns_->alive(nanos(now));
  epoll_event events[16];
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline_ - now).count();
  // In slices, so that a rank waiting on tcp still shows signs of life to the ranks of its host, which
  // read them in the shm segment (shm+tcp).
  int timeout = int(std::clamp<int64_t>(left, 0, kAliveSliceMs));
  if (epoll_wait(poller(), events, 16, timeout) < 0 && errno != EINTR) throwSystemError("tcp: epoll_wait");
  // Drained after the wait and before the caller looks again at everything it stands for (an abort, an
  // interrupt, a connection that arrived), so that the level-triggered eventfd cannot keep waking us.
  uint64_t count;
  [[maybe_unused]] ssize_t n = read(wake_.get(), &count, sizeof count);
}

void TcpTransport::exchange(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs) {
  if (flight_) flight_->notePeers(sends, recvs);
  messages_.clear();
  auto add = [&](int peer, const void* data, size_t bytes, bool recv) {
    if (!connector_.reaches(peer)) {
      throw CommError(code::kInvalid, "tcp: rank " + std::to_string(rank_) + " has no connection to rank " + std::to_string(peer));
    }
    if (bytes == 0) return;
    Link& link = links_[size_t(peer)];
    Message& m = messages_.emplace_back();
    m.peer = peer;
    m.data = static_cast<uint8_t*>(const_cast<void*>(data));
    m.bytes = bytes;
    m.seq = recv ? link.received++ : link.sent++;
    m.recv = recv;
  };
  for (const SendSpec& s : sends) add(s.peer, s.data, s.bytes, false);
  for (const RecvSpec& r : recvs) add(r.peer, r.data, r.bytes, true);
  for (;;) {
    checkSignals();
    bool moved = false, done = true;
    std::fill(sendBusy_.begin(), sendBusy_.end(), 0);
    std::fill(recvBusy_.begin(), recvBusy_.end(), 0);
    for (Message& m : messages_) {
      if (m.wire == wireBytes(m.bytes)) continue;
      done = false;
      // Bytes between a pair are FIFO: only the earliest unfinished message each way may move.
      uint8_t& busy = (m.recv ? recvBusy_ : sendBusy_)[size_t(m.peer)];
      if (busy) continue;
      busy = 1;
      if (!connected(m.peer)) continue;
      moved |= (m.recv ? pull(m) : push(m)) > 0;
    }
    if (done) return;
    if (moved) continue;
    if (Clock::now() >= deadline_) {
      auto it = std::find_if(messages_.begin(), messages_.end(), [](const Message& m) { return m.wire < wireBytes(m.bytes); });
      throw CommError(code::kTimeout, "deadline passed while " + describe(*it) + stragglers());
    }
    sleep();
  }
}

void TcpTransport::abort(const std::string& reason) {
  signal_.raise(rank_, reason);
  if (noticeSent_) return;
  noticeSent_ = true;
  std::string text = reason.substr(0, kMaxAbortReason);
  uint8_t header[H];
  encodeFrame(FrameHeader{FrameKind::Abort, 0, text.size(), 0}, header);
  for (Link& link : links_) {
    if (!link.fd || link.midFrame) continue;
    iovec iov[2] = {{header, H}, {text.data(), text.size()}};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = 2;
    // Best effort: a full socket buffer or a gone peer just misses the notice.
    [[maybe_unused]] ssize_t n = sendmsg(link.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
}

}  // namespace spmd::tcp
