// Sockets for the tcp backend: an owned descriptor, numeric IPv4/IPv6 addresses, and the options the
// backend sets. Every socket is non-blocking: the mesh and the transport wait in epoll, never in a call.
#pragma once
#include <sys/socket.h>

#include <cstdint>
#include <string>

namespace spmd::tcp {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset();

 private:
  int fd_ = -1;
};

class SocketAddress {
 public:
  // A numeric IPv4 or IPv6 address ("10.0.0.1", "fd00::1", "fe80::1%eth0"): names are resolved in JS, where
  // the choice of address is made. Throws kInvalid.
  static SocketAddress parse(const std::string& host, uint16_t port);
  // The address `fd` is bound to (getsockname), and the one its peer is (getpeername).
  static SocketAddress local(int fd);
  static SocketAddress peer(int fd);

  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage_); }
  socklen_t length() const { return length_; }
  int family() const { return storage_.ss_family; }
  uint16_t port() const;
  std::string host() const;
  // "10.0.0.1:29500" or "[fd00::1]:29500", for messages.
  std::string toString() const;

 private:
  sockaddr_storage storage_{};
  socklen_t length_ = 0;
};

// A non-blocking listening socket on `addr` (port 0: the kernel picks one). On the IPv6 wildcard "::" it
// also takes IPv4 connections, so one listener serves peers of either family.
Fd listenOn(const SocketAddress& addr, int backlog);
// A non-blocking socket whose connect() to `addr` is under way; its outcome comes from SO_ERROR once it is
// writable. `refused` gets the errno of a connect that failed at once (e.g. ECONNREFUSED), 0 otherwise.
Fd startConnect(const SocketAddress& addr, int& refused);
// On an established connection: no Nagle delay (every message is written whole and waited for at once),
// and keepalive probes, so a peer host that vanished without a FIN is noticed before a long deadline.
void tuneConnection(int fd);

}  // namespace spmd::tcp
