// The tcp backend's pieces on loopback, ranks as threads of one process: the handshake turns strangers away
// without a byte, messages of every size arrive intact, and each failure is reported as what it is, naming
// its peer: out of step (desync), gone, deadline, abort notice, interrupt. Then the hybrid transport: a ring
// across two "hosts" (a shm segment each, tcp between them), and a tcp failure that must end a mixed
// exchange whose shm half is still waiting.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backends/hybrid/hybrid_transport.h"
#include "backends/shm/segment.h"
#include "backends/shm/shm_transport.h"
#include "backends/tcp/mesh.h"
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

// W ranks connected on loopback: links[rank][lane][peer]. `beforeMesh(endpoints)` runs once every rank
// listens and before any dials, e.g. to let strangers knock first.
std::vector<Links> mesh(int W, int lanes, const std::function<void(const std::vector<SocketAddress>&)>& beforeMesh = {}) {
  std::vector<std::unique_ptr<Endpoint>> endpoints;
  std::vector<SocketAddress> addrs;
  for (int r = 0; r < W; ++r) {
    endpoints.push_back(std::make_unique<Endpoint>(SocketAddress::parse("127.0.0.1", 0), W));
    addrs.push_back(endpoints.back()->address());
  }
  if (beforeMesh) beforeMesh(addrs);
  std::vector<Links> links(static_cast<size_t>(W));
  std::vector<std::string> errors(static_cast<size_t>(W));
  std::vector<std::thread> threads;
  for (int r = 0; r < W; ++r) {
    threads.emplace_back([&, r] {
      MeshOptions o{r, W, lanes, testKey(1), {}, Clock::now() + std::chrono::seconds(20)};
      for (int p = 0; p < W; ++p) o.peers.push_back(p == r ? std::nullopt : std::optional(addrs[size_t(p)]));
      try {
        links[size_t(r)] = connectMesh(endpoints[size_t(r)]->takeListener(), o);
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const std::string& e : errors) if (!e.empty()) throw std::runtime_error("mesh: " + e);
  return links;
}

struct Ranks {
  std::vector<std::unique_ptr<AbortSignal>> signals;
  std::vector<std::unique_ptr<TcpTransport>> transports;
};

// Lane 0 of a loopback mesh as one TcpTransport per rank.
Ranks transports(int W) {
  std::vector<Links> links = mesh(W, 1);
  Ranks out;
  for (int r = 0; r < W; ++r) {
    out.signals.push_back(std::make_unique<AbortSignal>());
    std::vector<std::string> names(size_t(W), "loopback");
    out.transports.push_back(std::make_unique<TcpTransport>(r, 0, std::move(links[size_t(r)][0]), names, *out.signals.back()));
    out.transports.back()->setDeadline(Clock::now() + std::chrono::seconds(20));
  }
  return out;
}

// Runs body(rank) on a thread per rank; returns each rank's error code and text ("" when it succeeded).
std::vector<std::pair<std::string, std::string>> onThreads(int W, const std::function<void(int)>& body) {
  std::vector<std::pair<std::string, std::string>> out(static_cast<size_t>(W));
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

// A stranger dials rank 1 before the mesh forms and says `hello`; rank 1 must close without a byte.
void testStrangersGetNothing() {
  struct Knock {
    const char* what;
    std::function<void(uint8_t*)> hello;
  };
  const std::vector<Knock> knocks = {
      {"zeros", [](uint8_t* b) { std::memset(b, 0, kHelloBytes); }},
      {"wrong key", [](uint8_t* b) { encodeHello(Hello{0, 1, 3, 0, testKey(99)}, b); }},
      {"right key, lane out of range", [](uint8_t* b) { encodeHello(Hello{0, 1, 3, 7, testKey(1)}, b); }},
      {"right key, a rank that dials no one lower", [](uint8_t* b) { encodeHello(Hello{2, 1, 3, 0, testKey(1)}, b); }},
      {"right key, wrong world size", [](uint8_t* b) { encodeHello(Hello{0, 1, 4, 0, testKey(1)}, b); }},
  };
  std::vector<int> socks;
  mesh(3, 2, [&](const std::vector<SocketAddress>& addrs) {
    for (const Knock& k : knocks) {
      int fd = socket(AF_INET, SOCK_STREAM, 0);
      if (connect(fd, addrs[1].get(), addrs[1].length()) != 0) throw std::runtime_error("stranger cannot connect");
      uint8_t hello[kHelloBytes];
      k.hello(hello);
      if (send(fd, hello, kHelloBytes, 0) != ssize_t(kHelloBytes)) throw std::runtime_error("stranger cannot send");
      socks.push_back(fd);
    }
  });
  for (size_t i = 0; i < knocks.size(); ++i) {
    pollfd p{socks[i], POLLIN, 0};
    char buf[64];
    ssize_t n = poll(&p, 1, 5000) == 1 ? recv(socks[i], buf, sizeof buf, 0) : -2;
    check(n == 0, std::string("a stranger (") + knocks[i].what + ") is closed without a byte in reply (got " + std::to_string(n) + ")");
    close(socks[i]);
  }
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
  bool ok = true;
  for (auto& e : errors) ok &= e.first.empty();
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
    t.transports[1].reset();  // its sockets close, as when the process dies
  });
  auto start = Clock::now();
  auto errors = onThreads(1, [&](int) { t.transports[0]->recv(1, buf.data(), buf.size()); });
  closer.join();
  check(errors[0].first == std::string(code::kPeerGone) && has(errors[0].second, "rank 1") && Clock::now() - start < std::chrono::seconds(5),
        "a peer whose sockets close is reported gone at once, by rank: " + errors[0].second);
}

void testDeadline() {
  Ranks t = transports(2);
  Bytes buf(10);
  t.transports[0]->setDeadline(Clock::now() + std::chrono::milliseconds(200));
  auto start = Clock::now();
  auto errors = onThreads(1, [&](int) { t.transports[0]->recv(1, buf.data(), buf.size()); });
  auto took = Clock::now() - start;
  check(errors[0].first == std::string(code::kTimeout) && has(errors[0].second, "receiving 10 bytes from rank 1") &&
            took >= std::chrono::milliseconds(190) && took < std::chrono::seconds(2),
        "the deadline ends a wait promptly, naming the peer: " + errors[0].second);
}

void testAbortNotice() {
  Ranks t = transports(3);
  Bytes buf(10);
  auto errors = onThreads(3, [&](int r) {
    if (r == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      t.transports[0]->abort("stage x: something broke");
    } else {
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
  std::vector<std::unique_ptr<AbortSignal>> signals;
  std::vector<std::unique_ptr<shm::ShmTransport>> local;
  std::vector<std::unique_ptr<TcpTransport>> remote;
  std::vector<std::unique_ptr<HybridTransport>> hybrid;
};

Hybrid hybridRanks() {
  Hybrid h;
  std::vector<Links> links = mesh(4, 1);
  for (int host = 0; host < 2; ++host) {
    std::string name = "/spmd-tcp-test-" + std::to_string(getpid()) + "-" + std::to_string(host);
    h.segments.push_back(std::make_unique<shm::Segment>(shm::Segment::create(name, shm::Layout{2, 1, 4096, 0, 0})));
    h.segments.back()->unlink();
  }
  for (int r = 0; r < 4; ++r) {
    int host = r / 2;
    std::vector<int> localIndex = host == 0 ? std::vector<int>{0, 1, -1, -1} : std::vector<int>{-1, -1, 0, 1};
    // Links to the same host are not used by the hybrid; closing them keeps the test honest.
    for (int p : {2 * host, 2 * host + 1}) links[size_t(r)][0][size_t(p)].reset();
    h.signals.push_back(std::make_unique<AbortSignal>());
    h.local.push_back(std::make_unique<shm::ShmTransport>(*h.segments[size_t(host)], r % 2, 0, std::vector<int>{2 * host, 2 * host + 1}));
    h.remote.push_back(std::make_unique<TcpTransport>(r, 0, std::move(links[size_t(r)][0]), std::vector<std::string>(4, "loopback"), *h.signals.back()));
    h.hybrid.push_back(std::make_unique<HybridTransport>(r, localIndex, *h.local.back(), *h.remote.back()));
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
  bool ok = true;
  for (auto& e : errors) ok &= e.first.empty();
  for (int r = 0; r < 4 && ok; ++r)
    for (size_t i = 0; i < n; ++i) ok &= got[r][i] == pattern((r + 1) % 4, 0, 0, i);
  check(ok, "hybrid: a ring across two hosts (shm within, tcp between) moves 1 MiB each way intact (" + errors[0].second + ")");
}

void testHybridTcpFailureEndsShmWait() {
  Hybrid h = hybridRanks();
  Bytes buf(64);
  // Rank 2 goes away; rank 1 waits on rank 0 (shm, never sends) and rank 2 (tcp) at once.
  h.hybrid[2].reset();
  h.remote[2].reset();
  auto start = Clock::now();
  auto errors = onThreads(1, [&](int) {
    RecvSpec recvs[2] = {{0, buf.data(), 32}, {2, buf.data() + 32, 32}};
    h.hybrid[1]->exchange({}, recvs);
  });
  check(errors[0].first == std::string(code::kPeerGone) && has(errors[0].second, "rank 2") && Clock::now() - start < std::chrono::seconds(5),
        "hybrid: a tcp peer gone ends the exchange promptly although its shm half still waits: " + errors[0].second);
}

}  // namespace

int main() {
  return spmd::testing::runTests({
      {"strangers", testStrangersGetNothing}, {"intact", testMessagesArriveIntact}, {"out of step", testOutOfStep},
      {"peer gone", testPeerGone},            {"deadline", testDeadline},           {"abort", testAbortNotice},
      {"interrupt", testInterrupt},           {"hybrid ring", testHybridRing},      {"hybrid failure", testHybridTcpFailureEndsShmWait}});
}
