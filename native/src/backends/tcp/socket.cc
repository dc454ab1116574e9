#include "backends/tcp/socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace spmd::tcp {
namespace {

// Keepalive: first probe after 10 s idle, then every 5 s, give up after 3 unanswered.
constexpr int kKeepIdleSec = 10, kKeepIntervalSec = 5, kKeepCount = 3;

void setInt(int fd, int level, int name, int value, const char* what) {
  if (setsockopt(fd, level, name, &value, sizeof value) != 0) throwSystemError(std::string("tcp: setsockopt ") + what);
}

}  // namespace

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.release();
  }
  return *this;
}

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

SocketAddress SocketAddress::parse(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0 || found == nullptr) {
    throw CommError(code::kInvalid, "tcp: \"" + host + "\" is not a numeric IPv4 or IPv6 address (" + gai_strerror(rc) + ")");
  }
  SocketAddress a;
  std::memcpy(&a.storage_, found->ai_addr, found->ai_addrlen);
  a.length_ = found->ai_addrlen;
  freeaddrinfo(found);
  return a;
}

SocketAddress SocketAddress::local(int fd) {
  SocketAddress a;
  a.length_ = sizeof a.storage_;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a.storage_), &a.length_) != 0) throwSystemError("tcp: getsockname");
  return a;
}

SocketAddress SocketAddress::peer(int fd) {
  SocketAddress a;
  a.length_ = sizeof a.storage_;
  // A peer already gone leaves the address empty: its messages say "?".
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a.storage_), &a.length_) != 0) a.length_ = 0;
  return a;
}

uint16_t SocketAddress::port() const {
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
  return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
}

std::string SocketAddress::host() const {
  char buf[NI_MAXHOST];
  if (getnameinfo(get(), length_, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST) != 0) return "?";
  return buf;
}

std::string SocketAddress::toString() const {
  std::string h = host();
  return (family() == AF_INET6 ? "[" + h + "]" : h) + ":" + std::to_string(port());
}

Fd listenOn(const SocketAddress& addr, int backlog) {
  Fd fd(socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) throwSystemError("tcp: socket for " + addr.toString());
  setInt(fd.get(), SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR");
  if (addr.family() == AF_INET6) {
    const auto* a6 = reinterpret_cast<const sockaddr_in6*>(addr.get());
    if (IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr)) setInt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, 0, "IPV6_V6ONLY");
  }
  if (bind(fd.get(), addr.get(), addr.length()) != 0) throwSystemError("tcp: bind " + addr.toString());
  if (listen(fd.get(), backlog) != 0) throwSystemError("tcp: listen on " + addr.toString());
  return fd;
}

Fd startConnect(const SocketAddress& addr, int& refused) {
  Fd fd(socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) throwSystemError("tcp: socket for " + addr.toString());
  refused = 0;
  if (connect(fd.get(), addr.get(), addr.length()) != 0 && errno != EINPROGRESS) refused = errno;
  return fd;
}

void tuneConnection(int fd) {
  setInt(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY");
  setInt(fd, SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE");
  setInt(fd, IPPROTO_TCP, TCP_KEEPIDLE, kKeepIdleSec, "TCP_KEEPIDLE");
  setInt(fd, IPPROTO_TCP, TCP_KEEPINTVL, kKeepIntervalSec, "TCP_KEEPINTVL");
  setInt(fd, IPPROTO_TCP, TCP_KEEPCNT, kKeepCount, "TCP_KEEPCNT");
}

}  // namespace spmd::tcp
