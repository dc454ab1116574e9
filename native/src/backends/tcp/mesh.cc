#include "backends/tcp/mesh.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <list>

#include "base/error.h"

namespace spmd::tcp {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kFirstRetry = std::chrono::milliseconds(50);
constexpr auto kMaxRetry = std::chrono::seconds(1);
// Connections that have not shown a Hello yet: strangers beyond this many are closed at once, so a flood
// cannot exhaust descriptors while real peers still have to get in.
constexpr size_t kMaxUnintroduced = 64;

// What an epoll event points at.
struct Watch {
  enum Kind { kListener, kDial, kInbound } kind;
  Fd fd;
  uint8_t buf[kHelloBytes];
  size_t got = 0;
  explicit Watch(Kind k) : kind(k) {}
};

// One connection this rank dials: to `peer` on `lane`, retried until it is introduced.
struct Dial : Watch {
  Dial(int p, int l, SocketAddress a) : Watch(Watch::kDial), peer(p), lane(l), addr(std::move(a)) {}
  int peer, lane;
  SocketAddress addr;
  bool connected = false;  // the TCP connection is up and our Hello went out; waiting for the answer
  bool done = false;
  Clock::time_point retryAt{};
  Clock::duration backoff = kFirstRetry;
  std::string lastError = "no attempt yet";
};

std::string errnoText(int e) { return std::strerror(e); }

int millisUntil(Clock::time_point t) {
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(t - Clock::now()).count();
  return int(std::clamp<int64_t>(ms, 0, INT_MAX));
}

class MeshBuilder {
 public:
  MeshBuilder(Fd listener, const MeshOptions& o) : o_(o), listener_(Watch::kListener), links_(size_t(o.lanes)) {
    for (auto& lane : links_) lane.resize(size_t(o.size));
    epoll_ = Fd(epoll_create1(EPOLL_CLOEXEC));
    if (!epoll_) throwSystemError("tcp: epoll_create1");
    listener_.fd = std::move(listener);
    watch(listener_, EPOLLIN);
    for (int peer = 0; peer < o.size; ++peer) {
      if (!o.peers[size_t(peer)] || peer == o.rank) continue;
      if (peer > o.rank) {
        for (int lane = 0; lane < o.lanes; ++lane) dials_.emplace_back(peer, lane, *o.peers[size_t(peer)]);
      } else {
        expectedInbound_ += o.lanes;
      }
    }
  }

  Links run() {
    for (Dial& d : dials_) dial(d);
    epoll_event events[64];
    while (!complete()) {
      if (Clock::now() >= o_.deadline) throw CommError(code::kTimeout, missing());
      Clock::time_point wake = o_.deadline;
      for (Dial& d : dials_) {
        if (d.done || d.fd) continue;
        if (d.retryAt <= Clock::now()) dial(d);
        if (!d.fd) wake = std::min(wake, d.retryAt);
      }
      int n = epoll_wait(epoll_.get(), events, 64, millisUntil(wake));
      if (n < 0 && errno != EINTR) throwSystemError("tcp: epoll_wait");
      for (int i = 0; i < n; ++i) handle(*static_cast<Watch*>(events[i].data.ptr), events[i].events);
    }
    for (auto& lane : links_) for (Fd& fd : lane) if (fd) tuneConnection(fd.get());
    return std::move(links_);
  }

 private:
  void watch(Watch& w, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.ptr = &w;
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, w.fd.get(), &ev) != 0) throwSystemError("tcp: epoll_ctl");
  }

  bool complete() const {
    return inbound_ == expectedInbound_ && std::all_of(dials_.begin(), dials_.end(), [](const Dial& d) { return d.done; });
  }

  void dial(Dial& d) {
    int refused = 0;
    d.fd = startConnect(d.addr, refused);
    d.got = 0;
    d.connected = false;
    if (refused) return retry(d, errnoText(refused));
    watch(d, EPOLLOUT | EPOLLIN);
  }

  // Closing the socket also takes it out of the epoll set.
  void retry(Dial& d, const std::string& why) {
    d.fd.reset();
    d.lastError = why;
    d.retryAt = Clock::now() + d.backoff;
    d.backoff = std::min<Clock::duration>(d.backoff * 2, kMaxRetry);
  }

  void handle(Watch& w, uint32_t events) {
    switch (w.kind) {
      case Watch::kListener: return acceptAll();
      case Watch::kDial: return progressDial(static_cast<Dial&>(w), events);
      case Watch::kInbound: return progressInbound(w);
    }
  }

  Hello helloTo(int peer, int lane) const { return Hello{o_.rank, peer, o_.size, uint16_t(lane), o_.key}; }

  void progressDial(Dial& d, uint32_t events) {
    if (!d.connected) {
      if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
      int err = 0;
      socklen_t len = sizeof err;
      if (getsockopt(d.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      if (err) return retry(d, errnoText(err));
      uint8_t hello[kHelloBytes];
      encodeHello(helloTo(d.peer, d.lane), hello);
      // A fresh connection's send buffer is empty, so 56 bytes go at once or the connection is broken.
      if (send(d.fd.get(), hello, kHelloBytes, MSG_NOSIGNAL) != ssize_t(kHelloBytes)) return retry(d, errnoText(errno));
      d.connected = true;
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.ptr = &d;
      if (epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, d.fd.get(), &ev) != 0) throwSystemError("tcp: epoll_ctl");
      return;
    }
    ssize_t n = recv(d.fd.get(), d.buf + d.got, kHelloBytes - d.got, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {
      return retry(d, n == 0 ? "it closed the connection during the handshake (another job's key or runner version?)"
                             : errnoText(errno));
    }
    d.got += size_t(n);
    if (d.got < kHelloBytes) return;
    std::optional<Hello> h = decodeHello(d.buf);
    if (!h || !sameKey(h->key, o_.key) || h->from != d.peer || h->to != o_.rank || h->lane != d.lane) {
      throw CommError(code::kInvalid, "tcp: " + d.addr.toString() + " answered the handshake for rank " + std::to_string(d.peer) +
                                          " but is not that rank of this job");
    }
    epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, d.fd.get(), nullptr);
    links_[size_t(d.lane)][size_t(d.peer)] = std::move(d.fd);
    d.done = true;
  }

  void acceptAll() {
    for (;;) {
      Fd fd(accept4(listener_.fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!fd) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;  // EAGAIN, or a transient failure (EMFILE): the peer's dial is retried
      }
      if (unintroduced_.size() >= kMaxUnintroduced) continue;  // closed by Fd
      Watch& w = unintroduced_.emplace_back(Watch::kInbound);
      w.fd = std::move(fd);
      watch(w, EPOLLIN);
    }
  }

  // Reads the dialler's Hello; answers and keeps the connection only if it is a rank of this job that this
  // rank expects on that lane. Anything else is closed without a reply.
  void progressInbound(Watch& w) {
    ssize_t n = recv(w.fd.get(), w.buf + w.got, kHelloBytes - w.got, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n > 0) w.got += size_t(n);
    if (n > 0 && w.got < kHelloBytes) return;
    std::optional<Hello> h;
    if (w.got == kHelloBytes) h = decodeHello(w.buf);
    bool ok = h && sameKey(h->key, o_.key) && h->to == o_.rank && h->worldSize == o_.size && h->from >= 0 &&
              h->from < o_.rank && o_.peers[size_t(h->from)] && h->lane < o_.lanes &&
              !links_[h->lane][size_t(h->from)];
    if (ok) {
      uint8_t reply[kHelloBytes];
      encodeHello(helloTo(h->from, h->lane), reply);
      ok = send(w.fd.get(), reply, kHelloBytes, MSG_NOSIGNAL) == ssize_t(kHelloBytes);
    }
    if (ok) {
      epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, w.fd.get(), nullptr);
      links_[h->lane][size_t(h->from)] = std::move(w.fd);
      ++inbound_;
    }
    unintroduced_.remove_if([&](const Watch& x) { return &x == &w; });
  }

  std::string missing() const {
    std::string what;
    auto add = [&](const std::string& s) { what += (what.empty() ? "" : "; ") + s; };
    for (const Dial& d : dials_) {
      if (!d.done) add("rank " + std::to_string(d.peer) + " at " + d.addr.toString() + " lane " + std::to_string(d.lane) + ": " + d.lastError);
    }
    for (int peer = 0; peer < o_.rank; ++peer) {
      if (!o_.peers[size_t(peer)]) continue;
      for (int lane = 0; lane < o_.lanes; ++lane) {
        if (!links_[size_t(lane)][size_t(peer)]) add("rank " + std::to_string(peer) + " never connected (lane " + std::to_string(lane) + ")");
      }
    }
    return "tcp: rank " + std::to_string(o_.rank) + " could not connect to every peer before the deadline: " + what;
  }

  const MeshOptions& o_;
  Fd epoll_;
  Watch listener_;
  Links links_;
  std::list<Dial> dials_;          // stable addresses: epoll events point at them
  std::list<Watch> unintroduced_;  // accepted, Hello not read yet
  int expectedInbound_ = 0, inbound_ = 0;
};

}  // namespace

Endpoint::Endpoint(const SocketAddress& bind, int expectedPeers)
    : listener_(listenOn(bind, std::max(SOMAXCONN, expectedPeers))), address_(SocketAddress::local(listener_.get())) {}

Links connectMesh(Fd listener, const MeshOptions& o) { return MeshBuilder(std::move(listener), o).run(); }

}  // namespace spmd::tcp
