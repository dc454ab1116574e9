#include "backends/tcp/connector.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <list>
#include <memory>

#include "backends/tcp/abort_signal.h"
#include "base/error.h"

namespace spmd::tcp {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kFirstRetry = std::chrono::milliseconds(50);
constexpr auto kMaxRetry = std::chrono::seconds(1);
// Connections that have not proved the job's key yet (no good Hello): at most this many are held, and one
// more closes the oldest, never the newcomer, so that strangers who hold connections open cannot keep a
// rank's dial out (it is the newest when it arrives, and proves itself in a round trip). Each has
// kProofDeadline to prove itself and makes this rank read no more than a Hello (kHelloBytes). The store's
// numbers (comm/store.ts MAX_UNAUTHENTICATED, AUTH_DEADLINE_MS).
constexpr size_t kMaxUnproven = 256;
constexpr auto kProofDeadline = std::chrono::seconds(3);
// How long the listener rests when this process is out of descriptors and no unproven connection can make
// room: the pending connection stays queued, and waiting in epoll meanwhile would only spin.
constexpr auto kListenerRest = std::chrono::milliseconds(100);

// How often a connection awaited from a lower rank checks that the rank's listener is still there.
constexpr auto kProbeEvery = std::chrono::seconds(1);

// What an epoll event points at.
struct Watch {
  enum Kind { kControl, kListener, kDial, kInbound, kProbe } kind;
  Fd fd;
  uint8_t buf[kHelloBytes];  // a Challenge or a Hello being read (kChallengeBytes < kHelloBytes)
  size_t got = 0;
  Nonce nonce{};  // ours, which the other side's Hello must cover
  explicit Watch(Kind k) : kind(k) {}
};

// An accepted connection, challenged, until its Hello proves the key or it is closed (settled).
struct Unproven : Watch {
  Unproven() : Watch(Watch::kInbound) {}
  Clock::time_point deadline = Clock::now() + kProofDeadline;
  std::string from;  // the dialler's address, for messages
  bool settled = false;
};

// A connection a lane asked for: to `peer` on `lane`.
struct Wanted : Watch {
  Wanted(Watch::Kind k, int p, int l) : Watch(k), peer(p), lane(l) {}
  int peer, lane;
  bool over = false;  // introduced or failed for good: dropped before the next wait
};

// One connection this rank dials, retried until it is introduced.
struct Dial : Wanted {
  Dial(int p, int l) : Wanted(Watch::kDial, p, l) {}
  // Connecting; then reading the peer's challenge; then, our Hello sent, reading its answer.
  enum Stage { kConnecting, kChallenge, kAnswer } stage = kConnecting;
  Clock::time_point retryAt{};
  Clock::duration backoff = kFirstRetry;
};

// A connection this rank waits for a lower rank to dial. A rank that is gone never dials, and closing its
// process closed its listener: a connect to it now is refused, which is how the wait learns it in a second
// rather than at its deadline. A probe that gets through is closed at once (dropped there as a stranger).
struct Await : Wanted {
  Await(int p, int l) : Wanted(Watch::kProbe, p, l) {}
  Clock::time_point probeAt = Clock::now() + kProbeEvery;
};

std::string errnoText(int e) { return std::strerror(e); }

int millisUntil(Clock::time_point t) {
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(t - Clock::now()).count();
  return int(std::clamp<int64_t>(ms, 0, INT_MAX));
}

}  // namespace

// The thread's own state: nothing here is touched by the lanes.
struct Connector::Loop {
  Connector& c;
  const ConnectorOptions& o;
  Fd epoll;
  Watch control{Watch::kControl}, listener{Watch::kListener};
  std::list<Dial> dials;           // stable addresses: epoll events point at them
  std::list<Await> awaits;
  // Accepted, oldest first; settled ones are removed before the next wait, as an event of this round may
  // still point at them.
  std::list<Unproven> unproven;
  size_t held = 0;  // unproven connections not settled
  Clock::time_point listenerRests{};  // until then the listener is not watched (out of descriptors)

  Loop(Connector& connector, Fd listen, int controlFd) : c(connector), o(connector.o_) {
    epoll = Fd(epoll_create1(EPOLL_CLOEXEC));
    if (!epoll) throwSystemError("tcp: epoll_create1");
    listener.fd = std::move(listen);
    // The control eventfd stays the connector's, which outlives this loop: watched, not owned.
    watch(control, EPOLLIN, controlFd);
    watch(listener, EPOLLIN);
  }

  void watch(Watch& w, uint32_t events, int fd = -1) {
    epoll_event ev{};
    ev.events = events;
    ev.data.ptr = &w;
    if (epoll_ctl(epoll.get(), EPOLL_CTL_ADD, fd < 0 ? w.fd.get() : fd, &ev) != 0) throwSystemError("tcp: epoll_ctl");
  }

  // Until the connector stops: dials what the lanes asked for, retrying refused or lost dials with backoff.
  void run() {
    epoll_event events[64];
    for (;;) {
      if (!startAsked()) return;
      dials.remove_if([](const Dial& d) { return d.over; });
      awaits.remove_if([&](const Await& a) { return a.over || !c.fresh(a.lane, a.peer); });
      unproven.remove_if([](const Unproven& u) { return u.settled; });
      Clock::time_point wake = expireUnproven();
      for (Dial& d : dials) {
        if (d.fd || d.over) continue;
        if (d.retryAt <= Clock::now()) dial(d);
        if (!d.fd && !d.over) wake = std::min(wake, d.retryAt);
      }
      for (Await& a : awaits) {
        if (!a.fd && a.probeAt <= Clock::now()) probe(a);
        if (!a.fd && !a.over) wake = std::min(wake, a.probeAt);
      }
      int timeout = wake == Clock::time_point::max() ? -1 : millisUntil(wake);
      int n = epoll_wait(epoll.get(), events, 64, timeout);
      if (n < 0 && errno != EINTR) throwSystemError("tcp: epoll_wait");
      for (int i = 0; i < n; ++i) handle(*static_cast<Watch*>(events[i].data.ptr), events[i].events);
    }
  }

  // Takes the lanes' new requests; false once the connector stops.
  bool startAsked() {
    std::vector<std::pair<int, int>> asked;
    {
      std::lock_guard lock(c.mu_);
      if (c.stopping_) return false;
      asked.swap(c.asked_);
    }
    for (auto [lane, peer] : asked) {
      if (peer > o.rank) dials.emplace_back(peer, lane);
      else awaits.emplace_back(peer, lane);
    }
    return true;
  }

  // Closes the unproven connections whose time is up, wakes the listener after a rest; when next to.
  Clock::time_point expireUnproven() {
    const Clock::time_point now = Clock::now();
    if (listenerRests != Clock::time_point{} && listenerRests <= now) {
      listenerRests = {};
      rewatch(listener, EPOLLIN);
    }
    Clock::time_point next = listenerRests == Clock::time_point{} ? Clock::time_point::max() : listenerRests;
    for (Unproven& u : unproven) {
      if (!u.settled && u.deadline <= now) settle(u, true);
      if (!u.settled) next = std::min(next, u.deadline);
    }
    return next;
  }

  void rewatch(Watch& w, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.ptr = &w;
    if (epoll_ctl(epoll.get(), EPOLL_CTL_MOD, w.fd.get(), &ev) != 0) throwSystemError("tcp: epoll_ctl");
  }

  void handle(Watch& w, uint32_t events) {
    switch (w.kind) {
      case Watch::kControl: {
        uint64_t count;
        [[maybe_unused]] ssize_t n = read(c.control_.get(), &count, sizeof count);
        return;
      }
      case Watch::kListener: return acceptAll();
      case Watch::kDial: return progressDial(static_cast<Dial&>(w), events);
      case Watch::kInbound: return progressInbound(static_cast<Unproven&>(w));
      case Watch::kProbe: return probed(static_cast<Await&>(w));
    }
  }

  void probe(Await& a) {
    int refused = 0;
    a.fd = startConnect(address(a.peer), refused);
    if (refused) return probed(a, refused);
    watch(a, EPOLLOUT);
  }

  void probed(Await& a, int refused = 0) {
    int err = refused;
    socklen_t len = sizeof err;
    if (!err && getsockopt(a.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    a.fd.reset();
    a.probeAt = Clock::now() + kProbeEvery;
    if (err != ECONNREFUSED) return;
    c.fail(a.lane, a.peer, code::kPeerGone, gone(a.peer));
    forget(a);
  }

  const SocketAddress& address(int peer) const { return *o.peers[size_t(peer)]; }

  std::string gone(int peer) const {
    return "rank " + std::to_string(peer) + " (" + address(peer).toString() + ") is gone: it refused a connection";
  }

  void dial(Dial& d) {
    int refused = 0;
    d.fd = startConnect(address(d.peer), refused);
    d.got = 0;
    d.stage = Dial::kConnecting;
    if (refused) return retry(d, refused);
    watch(d, EPOLLOUT | EPOLLIN);
  }

  // Every rank listened before the ranks exchanged addresses, so a refused dial finds the peer's listener
  // closed: the peer has left. Anything else may pass (a lost SYN, a link that comes back) and is retried.
  void retry(Dial& d, int err, const std::string& why = "") {
    d.fd.reset();  // closing the socket also takes it out of the epoll set
    if (err == ECONNREFUSED) {
      c.fail(d.lane, d.peer, code::kPeerGone, gone(d.peer));
      return forget(d);
    }
    c.note(d.lane, d.peer, "dialling " + address(d.peer).toString() + ": " + (why.empty() ? errnoText(err) : why));
    d.retryAt = Clock::now() + d.backoff;
    d.backoff = std::min<Clock::duration>(d.backoff * 2, kMaxRetry);
  }

  // Removed only before the next wait, so that no loop over the dials loses its place.
  void forget(Wanted& d) {
    d.fd.reset();
    d.over = true;
  }

  Hello helloTo(int peer, int lane) const { return Hello{o.rank, peer, o.size, uint16_t(lane)}; }

  void notOurs(Dial& d) {
    c.fail(d.lane, d.peer, code::kInvalid, "tcp: " + address(d.peer).toString() + " answered the handshake for rank " + std::to_string(d.peer) + " but is not that rank of this job");
    forget(d);
  }

  void progressDial(Dial& d, uint32_t events) {
    if (d.stage == Dial::kConnecting) {
      if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
      int err = 0;
      socklen_t len = sizeof err;
      if (getsockopt(d.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      if (err) return retry(d, err);
      d.stage = Dial::kChallenge;
      return rewatch(d, EPOLLIN);
    }
    const size_t want = d.stage == Dial::kChallenge ? kChallengeBytes : kHelloBytes;
    ssize_t n = recv(d.fd.get(), d.buf + d.got, want - d.got, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) return retry(d, n == 0 ? 0 : errno, n == 0 ? "it closed the connection before answering this rank's Hello" : "");
    d.got += size_t(n);
    if (d.got < want) return;
    d.got = 0;
    if (d.stage == Dial::kChallenge) return prove(d);
    std::optional<Hello> h = decodeHello(d.buf);
    if (!h || !proves(o.mac, o.key, d.nonce, *h, true) || h->from != d.peer || h->to != o.rank || h->lane != d.lane) {
      return notOurs(d);
    } else {
      epoll_ctl(epoll.get(), EPOLL_CTL_DEL, d.fd.get(), nullptr);
      c.deliver(d.lane, d.peer, std::move(d.fd));
    }
    forget(d);
  }

  // The peer's challenge is in: our Hello proves the key against it and carries our own nonce.
  void prove(Dial& d) {
    std::optional<Hello> h = answerChallenge(o.mac, o.key, d.buf, helloTo(d.peer, d.lane));
    if (!h) return notOurs(d);
    if (!sendHello(d.fd.get(), *h)) return retry(d, errno);
    d.nonce = h->nonce;
    d.stage = Dial::kAnswer;
  }

  void acceptAll() {
    for (;;) {
      Fd fd(accept4(listener.fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!fd) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EMFILE && errno != ENFILE) return;  // EAGAIN, or a transient failure: the peer's dial is retried
        if (closeOldest()) continue;
        listenerRests = Clock::now() + kListenerRest;
        return rewatch(listener, 0);
      }
      if (held >= kMaxUnproven) closeOldest();
      uint8_t challenge[kChallengeBytes];
      Nonce nonce = freshNonce();
      encodeChallenge(nonce, challenge);
      // A fresh connection's send buffer is empty: the challenge goes at once, or the dialler is gone.
      if (send(fd.get(), challenge, kChallengeBytes, MSG_NOSIGNAL) != ssize_t(kChallengeBytes)) continue;
      Unproven& u = unproven.emplace_back();
      u.fd = std::move(fd);
      u.nonce = nonce;
      u.from = SocketAddress::peer(u.fd.get()).host();
      watch(u, EPOLLIN);
      ++held;
    }
  }

  // The oldest unproven connection goes, once what it sent is read: a rank's Hello already there is judged,
  // not lost. False when there is none.
  bool closeOldest() {
    auto oldest = std::find_if(unproven.begin(), unproven.end(), [](const Unproven& u) { return !u.settled; });
    if (oldest == unproven.end()) return false;
    progressInbound(*oldest);
    if (!oldest->settled) settle(*oldest, true);
    return true;
  }

  // Closed (or handed on, its descriptor moved out); `stranger`: without having proved the key.
  void settle(Unproven& u, bool stranger) {
    if (stranger) c.stranger(u.from);
    u.fd.reset();
    u.settled = true;
    --held;
  }

  // Reads the dialler's Hello; answers and keeps the connection only if it is a rank of this job that dials
  // this rank on that lane, for the first time. Anything else is closed without a reply.
  void progressInbound(Unproven& w) {
    if (w.settled) return;  // closed earlier in this round
    ssize_t n = recv(w.fd.get(), w.buf + w.got, kHelloBytes - w.got, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n > 0) w.got += size_t(n);
    if (n > 0 && w.got < kHelloBytes) return;
    // Closed without a byte: harmless, and what a lower rank's probe (Await) does; not counted as a stranger.
    if (n == 0 && w.got == 0) return settle(w, false);
    std::optional<Hello> h;
    if (w.got == kHelloBytes) h = decodeHello(w.buf);
    // Nothing the Hello claims is believed before its MAC proves the key against our challenge.
    if (!h || !proves(o.mac, o.key, w.nonce, *h, false)) return settle(w, true);
    if (h->lane == kRollCallLane) {
      answerRollCall(w.fd.get(), *h);
      return settle(w, false);
    }
    bool ok = h->to == o.rank && h->worldSize == o.size && h->from >= 0 && h->from < o.rank &&
              o.peers[size_t(h->from)] && h->lane < o.lanes && c.fresh(h->lane, h->from);
    if (ok) {
      Hello answer = helloTo(h->from, h->lane);
      answer.mac = helloMac(o.mac, o.key, h->nonce, answer, true);
      ok = sendHello(w.fd.get(), answer);
    }
    if (ok) {
      epoll_ctl(epoll.get(), EPOLL_CTL_DEL, w.fd.get(), nullptr);
      c.deliver(h->lane, h->from, std::move(w.fd));
    }
    settle(w, false);
  }

  // Our Hello and this rank's positions, in one send on a fresh connection (it takes them at once), to a
  // rank of this job; the connection is dropped after it either way.
  void answerRollCall(int fd, const Hello& h) {
    if (h.to != o.rank || h.worldSize != o.size || h.from < 0 || h.from >= o.size || !o.peers[size_t(h.from)]) return;
    uint8_t reply[kHelloBytes + kPositionsBytes];
    Hello answer{o.rank, h.from, o.size, kRollCallLane};
    answer.mac = helloMac(o.mac, o.key, h.nonce, answer, true);
    encodeHello(answer, reply);
    Positions where{};
    for (size_t lane = 0; lane < std::min(o.presence.size(), kWireLanes); ++lane) where[lane] = o.presence[lane]->position.load(std::memory_order_relaxed);
    encodePositions(where, reply + kHelloBytes);
    [[maybe_unused]] ssize_t n = send(fd, reply, sizeof reply, MSG_NOSIGNAL);
  }
};

Endpoint::Endpoint(const SocketAddress& bind, int expectedPeers)
    : listener_(listenOn(bind, std::max(SOMAXCONN, expectedPeers))), address_(SocketAddress::local(listener_.get())) {}

Connector::Connector(Fd listener, ConnectorOptions o)
    : o_(std::move(o)), slots_(size_t(o_.lanes * o_.size)) {
  if (o_.peers.size() != size_t(o_.size)) throw CommError(code::kInvalid, "tcp: expected an address entry for each of the " + std::to_string(o_.size) + " ranks");
  control_ = Fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!control_) throwSystemError("tcp: eventfd");
  // Built here, so that a failure to set up is thrown to the caller rather than lost on the thread.
  auto loop = std::make_unique<Loop>(*this, std::move(listener), control_.get());
  thread_ = std::thread([this, loop = std::move(loop)] {
    try {
      loop->run();
    } catch (const std::exception& e) {
      failAll(e.what());
    }
  });
}

Connector::~Connector() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  signalEventFd(control_.get());
  thread_.join();
}

Fd Connector::take(int lane, int peer, int wake) {
  std::lock_guard lock(mu_);
  Slot& s = slot(lane, peer);
  if (s.failureCode) throw CommError(s.failureCode, s.failure);
  if (s.fd) {
    s.taken = true;
    return std::move(s.fd);
  }
  if (!s.asked) {
    s.asked = true;
    s.wake = wake;
    s.status = peer > o_.rank ? "dialling " + o_.peers[size_t(peer)]->toString() : "waiting for rank " + std::to_string(peer) + " to dial this rank";
    asked_.emplace_back(lane, peer);
    signalEventFd(control_.get());
  }
  return Fd();
}

std::string Connector::waitingFor(int lane, int peer) const {
  std::lock_guard lock(mu_);
  if (strangers_ == 0) return slot(lane, peer).status;
  std::string from;
  for (const std::string& a : strangerHosts_) from += (from.empty() ? "" : ", ") + a;
  return slot(lane, peer).status + "; meanwhile this rank closed " + std::to_string(strangers_) + " connection" + (strangers_ == 1 ? "" : "s") +
         " that never proved the job's secret, from " + from + (strangerHostsMore_ ? " and other hosts" : "");
}

bool Connector::fresh(int lane, int peer) {
  std::lock_guard lock(mu_);
  const Slot& s = slot(lane, peer);
  return !s.fd && !s.taken;
}

void Connector::deliver(int lane, int peer, Fd fd) {
  tuneConnection(fd.get());
  std::lock_guard lock(mu_);
  Slot& s = slot(lane, peer);
  s.fd = std::move(fd);
  if (s.wake >= 0) signalEventFd(s.wake);
}

void Connector::fail(int lane, int peer, const char* code, const std::string& why) {
  std::lock_guard lock(mu_);
  Slot& s = slot(lane, peer);
  s.failureCode = code;
  s.failure = why;
  if (s.wake >= 0) signalEventFd(s.wake);
}

void Connector::failAll(const std::string& why) {
  for (int lane = 0; lane < o_.lanes; ++lane) {
    for (int peer = 0; peer < o_.size; ++peer) fail(lane, peer, code::kSystem, "tcp: the connecting thread stopped: " + why);
  }
}

void Connector::stranger(const std::string& from) {
  std::lock_guard lock(mu_);
  ++strangers_;
  bool known = std::find(strangerHosts_.begin(), strangerHosts_.end(), from) != strangerHosts_.end();
  if (known) return;
  if (strangerHosts_.size() < kStrangerHostsShown) strangerHosts_.push_back(from);
  else strangerHostsMore_ = true;
}

void Connector::note(int lane, int peer, const std::string& status) {
  std::lock_guard lock(mu_);
  slot(lane, peer).status = status;
}

}  // namespace spmd::tcp
