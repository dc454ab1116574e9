// The tcp backend's pieces on loopback, ranks as threads of one process: the handshake turns strangers away
// without a byte, connections open on first use and only to the peers a rank talks to, messages of every size
// arrive intact, and each failure is reported as what it is, naming its peer: out of step (desync), gone
// (connected or not yet), deadline, abort notice, interrupt. Then the hybrid transport: a ring across two
// "hosts" (a shm segment each, tcp between them), and a tcp failure that must end a mixed exchange whose
// shm half is still waiting.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backends/hybrid/hybrid_transport.h"
#include "backends/shm/segment.h"
#include "backends/shm/shm_transport.h"
#include "backends/tcp/connector.h"
#include "backends/tcp/roll_call.h"
#include "backends/tcp/tcp_transport.h"
#include "base/error.h"
#include "harness.h"

namespace {

using namespace spmd;
using spmd::testing::check;
using namespace spmd::tcp;
using Clock = std::chrono::steady_clock;
using Bytes = std::vector<unsigned char>;

Key testKey(uint8_t seed) {
  Key k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = uint8_t(seed + i * 13);
  return k;
}

// The handshake's MAC in these tests (the addon gives OpenSSL's HMAC-SHA-256): keyed, and covering every
// byte, so that another key or another message gives another MAC, which is all the connector relies on.
Mac testMac(const Key& key, const uint8_t* bytes, size_t n) {
  Mac m = key;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) {
    h = (h ^ bytes[i]) * 1099511628211ull;
    m[i % m.size()] ^= uint8_t(h >> 24);
    m[(i + 7) % m.size()] += uint8_t(h >> 40);
  }
  return m;
}

// W ranks on loopback, lane 0 of each a TcpTransport over the rank's Connector. `beforeConnecting(addrs)`
// runs once every rank listens and before any connector runs, e.g. to let strangers knock first. `reaches`:
// which peers a rank reaches over tcp (all but itself unless given).
struct Ranks {
  std::vector<SocketAddress> addrs;
  std::vector<std::unique_ptr<AbortSignal>> signals;
  std::vector<std::unique_ptr<Connector>> connectors;
  std::vector<std::unique_ptr<TcpTransport>> transports;  // last: destroyed before the connectors they use

  // Rank r's process ends: its sockets and its listener close.
  void end(int r) {
    transports[size_t(r)].reset();
    connectors[size_t(r)].reset();
  }
};

Ranks transports(int W, const std::function<void(const std::vector<SocketAddress>&)>& beforeConnecting = {},
                 const std::function<bool(int, int)>& reaches = [](int r, int p) { return r != p; }) {
  Ranks out;
  std::vector<std::unique_ptr<Endpoint>> endpoints;
  for (int r = 0; r < W; ++r) {
    endpoints.push_back(std::make_unique<Endpoint>(SocketAddress::parse("127.0.0.1", 0), W));
    out.addrs.push_back(endpoints.back()->address());
  }
  if (beforeConnecting) beforeConnecting(out.addrs);
  for (int r = 0; r < W; ++r) {
    ConnectorOptions o{r, W, 1, testKey(1), testMac, {}, {}};
    for (int p = 0; p < W; ++p) o.peers.push_back(reaches(r, p) ? std::optional(out.addrs[size_t(p)]) : std::nullopt);
    out.signals.push_back(std::make_unique<AbortSignal>());
    out.connectors.push_back(std::make_unique<Connector>(endpoints[size_t(r)]->takeListener(), std::move(o)));
    std::vector<std::string> names(size_t(W), "loopback");
    out.transports.push_back(std::make_unique<TcpTransport>(r, 0, *out.connectors.back(), names, *out.signals.back()));
    out.transports.back()->setDeadline(Clock::now() + std::chrono::seconds(20));
  }
  return out;
}

// Each rank's error code and text ("" when it succeeded).
using Outcomes = std::vector<std::pair<std::string, std::string>>;

// Runs body(rank) on a thread per rank.
Outcomes onThreads(int W, const std::function<void(int)>& body) {
  Outcomes out(static_cast<size_t>(W));
  std::vector<std::thread> threads;
  for (int r = 0; r < W; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const CommError& e) {
        out[size_t(r)] = {e.code(), e.what()};
      } catch (const std::exception& e) {
        out[size_t(r)] = {"other", e.what()};
      }
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

unsigned char pattern(int from, int to, size_t msg, size_t i) { return static_cast<unsigned char>(from * 37 + to * 11 + msg * 5 + i * 7); }

// Sends one byte round a ring on lane 0 (both directions at once): every rank's neighbours connect.
Outcomes ring(Ranks& t, int W) {
  return onThreads(W, [&](int r) {
    unsigned char out[2] = {uint8_t(r), uint8_t(r)}, in[2] = {};
    SendSpec sends[2] = {{(r + 1) % W, &out[0], 1}, {(r + W - 1) % W, &out[1], 1}};
    RecvSpec recvs[2] = {{(r + W - 1) % W, &in[0], 1}, {(r + 1) % W, &in[1], 1}};
    t.transports[size_t(r)]->exchange(sends, recvs);
    if (in[0] != (r + W - 1) % W || in[1] != (r + 1) % W) throw std::runtime_error("ring: wrong bytes");
  });
}

bool allOk(const Outcomes& errors) {
  for (auto& e : errors) if (!e.first.empty()) return false;
  return true;
}

// Strangers dial rank 1 before its connector runs, take its challenge and answer with `hello` (given the
// challenge's nonce); rank 1 must close without a byte more, and still let the real peers in.
void testStrangersGetNothing() {
  struct Knock {
    const char* what;
    std::function<void(const Nonce&, uint8_t*)> hello;
  };
  auto proving = [](Key key, Hello h, bool sameChallenge = true) {
    return [=](const Nonce& nonce, uint8_t* b) mutable {
      h.mac = helloMac(testMac, key, sameChallenge ? nonce : Nonce{}, h, false);
      encodeHello(h, b);
    };
  };
  const std::vector<Knock> knocks = {
      {"zeros", [](const Nonce&, uint8_t* b) { std::memset(b, 0, kHelloBytes); }},
      {"wrong key", proving(testKey(99), Hello{0, 1, 3, 0})},
      {"right key, another challenge's proof (a replay)", proving(testKey(1), Hello{0, 1, 3, 0}, false)},
      {"right key, lane out of range", proving(testKey(1), Hello{0, 1, 3, 7})},
      {"right key, a rank that dials no one lower", proving(testKey(1), Hello{2, 1, 3, 0})},
      {"right key, wrong world size", proving(testKey(1), Hello{0, 1, 4, 0})},
  };
  std::vector<int> socks;
  Ranks t = transports(3, [&](const std::vector<SocketAddress>& addrs) {
    for (size_t i = 0; i < knocks.size(); ++i) {
      int fd = socket(AF_INET, SOCK_STREAM, 0);
      if (connect(fd, addrs[1].get(), addrs[1].length()) != 0) throw std::runtime_error("stranger cannot connect");
      socks.push_back(fd);
    }
  });
  for (size_t i = 0; i < knocks.size(); ++i) {
    pollfd p{socks[i], POLLIN, 0};
    uint8_t challenge[kChallengeBytes];
    bool challenged = poll(&p, 1, 5000) == 1 && recv(socks[i], challenge, kChallengeBytes, MSG_WAITALL) == ssize_t(kChallengeBytes);
    std::optional<Nonce> nonce = challenged ? decodeChallenge(challenge) : std::nullopt;
    check(nonce.has_value(), std::string("a stranger (") + knocks[i].what + ") is challenged");
    uint8_t hello[kHelloBytes];
    knocks[i].hello(nonce.value_or(Nonce{}), hello);
    if (send(socks[i], hello, kHelloBytes, 0) != ssize_t(kHelloBytes)) throw std::runtime_error("stranger cannot send");
    char buf[64];
    ssize_t n = poll(&p, 1, 5000) == 1 ? recv(socks[i], buf, sizeof buf, 0) : -2;
    check(n == 0, std::string("a stranger (") + knocks[i].what + ") is closed without a byte in reply (got " + std::to_string(n) + ")");
    close(socks[i]);
  }
  auto errors = ring(t, 3);
  check(allOk(errors), "after the strangers, the ranks connect and exchange (" + errors[1].second + ")");
}

// A stranger's connection to `addr`: idle, or with half a Hello sent (a dialler that stops mid-handshake).
int strangerConnection(const SocketAddress& addr, bool halfSent) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(fd, addr.get(), addr.length()) != 0) throw std::runtime_error("stranger cannot connect");
  uint8_t half[kHelloBytes / 2] = {};
  if (halfSent && send(fd, half, sizeof half, 0) != ssize_t(sizeof half)) throw std::runtime_error("stranger cannot send");
  return fd;
}

// Whether the rank closed `fd` (it reads as the end, after the challenge), waiting up to `ms` for it.
bool closedByRank(int fd, int ms) {
  uint8_t buf[kChallengeBytes + 1];
  size_t got = 0;
  for (pollfd p{fd, POLLIN, 0}; poll(&p, 1, ms) == 1;) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return n == 0;
    if ((got += size_t(n)) > kChallengeBytes) return false;
  }
  return false;
}

// Issue 63: 300 connections held open on rank 1 before anyone dials it, half of them idle and half with half a
// Hello sent, more than the connector holds unproven (256). The oldest make room, never the newest: the ranks'
// own dials get in and the ring completes at once; the first strangers are closed.
void testCrowdCannotKeepRanksOut() {
  std::vector<int> socks;
  Ranks t = transports(3, [&](const std::vector<SocketAddress>& addrs) {
    for (int i = 0; i < 300; ++i) socks.push_back(strangerConnection(addrs[1], i % 2 == 1));
  });
  auto start = Clock::now();
  auto errors = ring(t, 3);
  auto took = Clock::now() - start;
  check(allOk(errors) && took < std::chrono::seconds(2), "300 strangers' connections on rank 1 keep no rank out: " + errors[0].second + errors[2].second +
                                                             " (" + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()) + " ms)");
  size_t closed = 0;
  for (int i = 0; i < 44; ++i) closed += closedByRank(socks[size_t(i)], 1000) ? 1 : 0;
  check(closed == 44, "the 44 oldest strangers made room: " + std::to_string(closed) + " closed");
  for (int fd : socks) close(fd);
}

// An unproven connection has 3 s: an idle one and a half-sent one are closed then, and a rank still waiting
// for its peer says what it met instead.
void testUnprovenDeadline() {
  Ranks t = transports(3);
  int idle = strangerConnection(t.addrs[2], false), half = strangerConnection(t.addrs[2], true);
  auto start = Clock::now();
  bool closed = closedByRank(idle, 6000) && closedByRank(half, 1000);
  auto took = Clock::now() - start;
  check(closed && took > std::chrono::milliseconds(2500) && took < std::chrono::seconds(5),
        "an idle and a half-sent connection are closed after 3 s (" + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()) + " ms)");
  close(idle);
  close(half);
  Bytes buf(10);
  t.transports[2]->setDeadline(Clock::now() + std::chrono::milliseconds(200));
  auto errors = onThreads(1, [&](int) { t.transports[2]->recv(0, buf.data(), buf.size()); });
  check(has(errors[0].second, "(waiting for rank 0 to dial this rank; meanwhile this rank closed 2 connections that never proved the job's secret, from 127.0.0.1)"),
        "the deadline's message names what came instead: " + errors[0].second);
}

size_t openDescriptors() {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) n += e.is_symlink() ? 1 : 0;
  return n;
}

// Connections open on first use, to the peers a rank talks to: a ring of 6 opens 6 connections (12
// descriptors in this one process, where a full mesh would open 30), and each rank's lane its epoll.
void testConnectionsOnFirstUse() {
  const int W = 6;
  Ranks t = transports(W);
  const size_t before = openDescriptors();
  auto errors = ring(t, W);
  const size_t opened = openDescriptors() - before;
  check(allOk(errors) && opened == 2 * W + W, "a ring opens one connection per neighbour and no more: " + std::to_string(opened) +
                                                  " descriptors opened (" + errors[0].second + ")");
  errors = ring(t, W);
  check(allOk(errors) && openDescriptors() - before == opened, "the connections are kept for the next exchange");
}

void testMessagesArriveIntact() {
  const int W = 3;
  const std::vector<size_t> sizes = {0, 1, 1000, kChunkBytes - 1, kChunkBytes, 3 * kChunkBytes + 17, (size_t(4) << 20) + 5};
  Ranks t = transports(W);
  std::vector<std::vector<std::vector<Bytes>>> got(W, std::vector<std::vector<Bytes>>(W));
  auto errors = onThreads(W, [&](int r) {
    std::vector<std::vector<Bytes>> out(W);
    std::vector<SendSpec> sends;
    std::vector<RecvSpec> recvs;
    for (int p = 0; p < W; ++p) {
      if (p == r) continue;
      got[r][p].resize(sizes.size());
      out[p].resize(sizes.size());
      for (size_t m = 0; m < sizes.size(); ++m) {
        out[p][m].resize(sizes[m]);
        for (size_t i = 0; i < sizes[m]; ++i) out[p][m][i] = pattern(r, p, m, i);
        got[r][p][m].resize(sizes[m]);
        sends.push_back({p, out[p][m].data(), sizes[m]});
        recvs.push_back({p, got[r][p][m].data(), sizes[m]});
      }
    }
    for (int rep = 0; rep < 2; ++rep) t.transports[r]->exchange(sends, recvs);  // twice: sequence numbers go on
  });
  bool ok = allOk(errors);
  for (int r = 0; r < W && ok; ++r)
    for (int p = 0; p < W; ++p)
      for (size_t m = 0; p != r && m < sizes.size(); ++m)
        for (size_t i = 0; i < sizes[m]; ++i) ok &= got[r][p][m][i] == pattern(p, r, m, i);
  check(ok, "messages of 0 B to 4 MiB, several per pair in one exchange, arrive intact and in order (" + errors[0].second + ")");
}

void testOutOfStep() {
  Ranks t = transports(2);
  Bytes small(100, 7), big(200);
  auto errors = onThreads(2, [&](int r) {
    if (r == 0) t.transports[0]->send(1, small.data(), small.size());
    else t.transports[1]->recv(0, big.data(), big.size());
  });
  check(errors[1].first == std::string(code::kDesync) && has(errors[1].second, "rank 0") && has(errors[1].second, "100 bytes") &&
            has(errors[1].second, "200 bytes"),
        "a peer that sends 100 bytes where 200 are expected is named as out of step: " + errors[1].second);
}

void testPeerGone() {
  Ranks t = transports(2);
  Bytes buf(1 << 20);
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    t.end(1);
  });
  auto start = Clock::now();
  auto errors = onThreads(1, [&](int) { t.transports[0]->recv(1, buf.data(), buf.size()); });
  closer.join();
  check(errors[0].first == std::string(code::kPeerGone) && has(errors[0].second, "rank 1") && Clock::now() - start < std::chrono::seconds(5),
        "a peer whose sockets close is reported gone at once, by rank: " + errors[0].second);
}

// A rank whose listener is closed (its process ended) is gone, whichever of the two would dial: this rank
// (the dial is refused) or that rank (a probe finds its listener closed, within seconds, not at the deadline).
void testGoneBeforeConnecting() {
  for (int waiter : {0, 1}) {
    Ranks t = transports(2);
    t.end(1 - waiter);
    Bytes buf(10);
    auto start = Clock::now();
    auto errors = onThreads(1, [&](int) { t.transports[size_t(waiter)]->recv(1 - waiter, buf.data(), buf.size()); });
    const std::string who = "rank " + std::to_string(1 - waiter);
    check(errors[0].first == std::string(code::kPeerGone) && has(errors[0].second, who + " (127.0.0.1:") &&
              has(errors[0].second, "refused a connection") && Clock::now() - start < std::chrono::seconds(5),
          "a peer gone before it connected is named gone promptly (" + std::string(waiter ? "it dials" : "this rank dials") + "): " + errors[0].second);
  }
}

void testDeadline() {
  Ranks t = transports(3);
  Bytes buf(10);
  t.transports[0]->setDeadline(Clock::now() + std::chrono::milliseconds(200));
  auto start = Clock::now();
  auto errors = onThreads(1, [&](int) { t.transports[0]->recv(1, buf.data(), buf.size()); });
  auto took = Clock::now() - start;
  check(errors[0].first == std::string(code::kTimeout) && has(errors[0].second, "receiving 10 bytes from rank 1") &&
            took >= std::chrono::milliseconds(190) && took < std::chrono::seconds(2),
        "the deadline ends a wait promptly, naming the peer: " + errors[0].second);
  // Rank 0 never dials rank 2: it is alive, but not (yet) at the op.
  t.transports[2]->setDeadline(Clock::now() + std::chrono::milliseconds(200));
  errors = onThreads(1, [&](int) { t.transports[2]->recv(0, buf.data(), buf.size()); });
  check(errors[0].first == std::string(code::kTimeout) && has(errors[0].second, "receiving from rank 0, not yet connected (waiting for rank 0 to dial this rank)"),
        "a deadline that passes before a connection came says so: " + errors[0].second);
}

void testAbortNotice() {
  Ranks t = transports(3);
  Bytes buf(10);
  auto errors = onThreads(3, [&](int r) {
    if (r == 0) {
      for (int p : {1, 2}) t.transports[0]->send(p, buf.data(), 1);  // connected, and the peers read on
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      t.transports[0]->abort("stage x: something broke");
    } else {
      t.transports[r]->recv(0, buf.data(), 1);
      t.transports[r]->recv(0, buf.data(), buf.size());
    }
  });
  check(errors[1].first == std::string(code::kAborted) && errors[1].second == "rank 0 aborted the job: stage x: something broke" &&
            errors[2].second == errors[1].second,
        "an abort reaches every peer with its reason: " + errors[1].second);
}

void testInterrupt() {
  Ranks t = transports(2);
  Bytes buf(10);
  std::thread interrupter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    t.transports[0]->interrupt();
  });
  auto start = Clock::now();
  bool interrupted = false;
  try {
    t.transports[0]->recv(1, buf.data(), buf.size());
  } catch (const Interrupted&) {
    interrupted = true;
  }
  interrupter.join();
  check(interrupted && Clock::now() - start < std::chrono::seconds(2), "interrupt() ends a wait from another thread");
}

// Two hosts of two ranks: ranks {0,1} and {2,3} each share a segment; every other pair talks over tcp.
struct Hybrid {
  std::vector<std::unique_ptr<shm::Segment>> segments;
  Ranks tcp;
  std::vector<std::unique_ptr<shm::ShmTransport>> local;
  std::vector<std::unique_ptr<HybridTransport>> hybrid;
};

Hybrid hybridRanks() {
  Hybrid h;
  auto host = [](int r) { return r / 2; };
  h.tcp = transports(4, {}, [&](int r, int p) { return host(r) != host(p); });
  for (int i = 0; i < 2; ++i) {
    std::string name = "/spmd-tcp-test-" + std::to_string(getpid()) + "-" + std::to_string(i);
    h.segments.push_back(std::make_unique<shm::Segment>(shm::Segment::create(name, shm::Layout{2, 1, 4096, 0, 0})));
    h.segments.back()->unlink();
  }
  for (int r = 0; r < 4; ++r) {
    std::vector<int> localIndex = host(r) == 0 ? std::vector<int>{0, 1, -1, -1} : std::vector<int>{-1, -1, 0, 1};
    h.local.push_back(std::make_unique<shm::ShmTransport>(*h.segments[size_t(host(r))], r % 2, 0, std::vector<int>{2 * host(r), 2 * host(r) + 1}));
    h.hybrid.push_back(std::make_unique<HybridTransport>(r, localIndex, *h.local.back(), *h.tcp.transports[size_t(r)]));
    h.hybrid.back()->setDeadline(Clock::now() + std::chrono::seconds(20));
  }
  return h;
}

void testHybridRing() {
  Hybrid h = hybridRanks();
  const size_t n = (size_t(1) << 20) + 3;  // far beyond the 4 KiB shm channels and the socket buffers
  std::vector<Bytes> got(4, Bytes(n));
  auto errors = onThreads(4, [&](int r) {
    Bytes out(n);
    for (size_t i = 0; i < n; ++i) out[i] = pattern(r, 0, 0, i);
    // Both directions at once: each rank's exchange mixes a shm peer and a tcp peer.
    for (int shift : {1, -1}) h.hybrid[r]->sendRecv((r + shift + 4) % 4, out.data(), n, (r - shift + 4) % 4, got[r].data(), n);
  });
  bool ok = allOk(errors);
  for (int r = 0; r < 4 && ok; ++r)
    for (size_t i = 0; i < n; ++i) ok &= got[r][i] == pattern((r + 1) % 4, 0, 0, i);
  check(ok, "hybrid: a ring across two hosts (shm within, tcp between) moves 1 MiB each way intact (" + errors[0].second + ")");
}

void testHybridTcpFailureEndsShmWait() {
  Hybrid h = hybridRanks();
  Bytes buf(64);
  // Rank 2 goes away; rank 1 waits on rank 0 (shm, never sends) and rank 2 (tcp) at once.
  h.hybrid[2].reset();
  h.tcp.end(2);
  auto start = Clock::now();
  auto errors = onThreads(1, [&](int) {
    RecvSpec recvs[2] = {{0, buf.data(), 32}, {2, buf.data() + 32, 32}};
    h.hybrid[1]->exchange({}, recvs);
  });
  check(errors[0].first == std::string(code::kPeerGone) && has(errors[0].second, "rank 2") && Clock::now() - start < std::chrono::seconds(5),
        "hybrid: a tcp peer gone ends the exchange promptly although its shm half still waits: " + errors[0].second);
}

}  // namespace

// Rank 0 asks four peers where they are: rank 1 answers with each lane's position; rank 2 has exited (its
// listener refuses); rank 3's host takes the connection but nothing answers (a stopped process); rank 4 is
// another job's (a connector under another key, which drops the question unanswered).
void testRollCall() {
  std::vector<SocketAddress> addrs(5, SocketAddress::parse("127.0.0.1", 0));
  std::array<Presence, 2> where;
  where[0].position = (7u << 1) | 1;
  where[1].position = 3u << 1;
  auto connectorOf = [&](int r, Key key) {
    Endpoint e(addrs[0], 4);
    addrs[size_t(r)] = e.address();
    ConnectorOptions o{r, 5, 2, key, testMac, std::vector<std::optional<SocketAddress>>(5, e.address()), {&where[0], &where[1]}};
    return std::make_unique<Connector>(e.takeListener(), std::move(o));
  };
  auto rank1 = connectorOf(1, testKey(1));
  addrs[2] = Endpoint(addrs[0], 1).address();  // closed at once: a rank that has exited
  Fd stopped = listenOn(addrs[0], 4);
  addrs[3] = SocketAddress::local(stopped.get());
  auto stranger = connectorOf(4, testKey(2));
  std::vector<std::optional<SocketAddress>> peers(addrs.begin(), addrs.end());
  peers[0].reset();
  RollCall call(0, 5, testKey(1), testMac, peers);
  auto start = Clock::now();
  std::vector<PeerSighting> seen = call.call(1);
  auto took = Clock::now() - start;
  std::sort(seen.begin(), seen.end(), [](const PeerSighting& a, const PeerSighting& b) { return a.rank < b.rank; });
  check(seen.size() == 4 && took < std::chrono::milliseconds(1500), "every peer is accounted for within the limit");
  check(seen[0].answered && seen[0].position == (3u << 1) && seen[0].unanswered.empty(), "rank 1 answers with the asked lane's position");
  check(!seen[1].answered && seen[1].gone && has(seen[1].unanswered, "is gone (" + addrs[2].toString() + " refused"), "an exited rank is gone: " + seen[1].unanswered);
  check(!seen[2].answered && !seen[2].gone && has(seen[2].unanswered, "did not answer the roll call within 1 s"), "a stopped rank does not answer: " + seen[2].unanswered);
  check(!seen[3].answered && has(seen[3].unanswered, "closed the connection before answering"), "another job's rank drops the question: " + seen[3].unanswered);
  start = Clock::now();
  std::vector<PeerSighting> again = call.call(0);
  check(Clock::now() - start < std::chrono::milliseconds(100), "a second call (another lane) reuses the answers");
  auto rank1Again = std::find_if(again.begin(), again.end(), [](const PeerSighting& p) { return p.rank == 1; });
  check(rank1Again != again.end() && rank1Again->position == ((7u << 1) | 1), "and reads that lane's position from them");
}

int main() {
  return spmd::testing::runTests({
      {"strangers", testStrangersGetNothing},
      {"crowd", testCrowdCannotKeepRanksOut},
      {"unproven deadline", testUnprovenDeadline},
      {"first use", testConnectionsOnFirstUse},
      {"intact", testMessagesArriveIntact},
      {"out of step", testOutOfStep},
      {"peer gone", testPeerGone},
      {"gone before connecting", testGoneBeforeConnecting},
      {"deadline", testDeadline},
      {"abort", testAbortNotice},
      {"interrupt", testInterrupt},
      {"hybrid ring", testHybridRing},
      {"hybrid failure", testHybridTcpFailureEndsShmWait},
      {"roll call", testRollCall}});
}
