// Transport over one lane of tcp connections (one socket per peer, opened by the Connector on first use:
// a message to a peer not yet connected waits, beside the others, until its connection arrives). exchange() moves every listed message
// at once: each pass writes and reads whatever the sockets take without blocking, in framed chunks (wire.h),
// so sending to one peer and receiving from others proceed together and a large message streams through
// the socket buffers while its peer is already reading. When nothing moves, the thread sleeps in
// epoll_wait until a socket is ready, the deadline passes, or the lane is woken (abort, interrupt).
#pragma once
#include <atomic>
#include <string>
#include <vector>

#include "backends/tcp/abort_signal.h"
#include "backends/tcp/connector.h"
#include "backends/tcp/socket.h"
#include "backends/tcp/wire.h"
#include "base/transport.h"

namespace spmd::tcp {

class TcpTransport : public InterruptibleTransport {
 public:
  // `names[peer]`: how messages name where it is ("10.0.0.2:41234"), for the ranks `connector` reaches.
  TcpTransport(int rank, int lane, Connector& connector, std::vector<std::string> names, AbortSignal& signal);
  int rank() const override { return rank_; }
  int size() const override { return int(links_.size()); }
  void exchange(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs) override;
  void interrupt() override;

  // Raises the signal (waking every lane) and, once, tells the peers on this lane: a notice goes on each
  // connection that is between frames; the others learn when this process's sockets close.
  void abort(const std::string& reason);

 private:
  struct Link {
    Fd fd;
    std::string name;
    uint64_t sent = 0, received = 0;  // messages so far: the next one's sequence number
    bool midFrame = false;            // a frame to this peer is partly written: no notice can go in between
  };
  struct Message {
    int peer = 0;
    uint8_t* data = nullptr;
    size_t bytes = 0;
    uint64_t seq = 0;
    bool recv = false;
    size_t wire = 0;               // bytes of headers and payload moved so far
    uint8_t header[kFrameHeaderBytes];  // recv: the header being read
  };

  int poller();
  bool connected(int peer);
  size_t push(Message& m);
  size_t pull(Message& m);
  void checkHeader(const Message& m, size_t chunk);
  [[noreturn]] void peerGone(const Message& m, const char* how);
  [[noreturn]] void abortedByPeer(int peer, uint64_t reasonBytes);
  void sleep();
  void checkSignals() const;
  std::string describe(const Message& m) const;

  int rank_;
  int lane_;
  Connector& connector_;
  std::vector<Link> links_;
  AbortSignal& signal_;
  Fd epoll_;
  Fd wake_;  // eventfd: the abort signal and interrupt() write to it
  std::atomic<bool> interrupted_{false};
  bool noticeSent_ = false;
  std::vector<Message> messages_;  // reused across exchanges: no allocation once warm
  std::vector<uint8_t> sendBusy_, recvBusy_;  // per peer, per pass: an earlier message has the pair's turn
};

}  // namespace spmd::tcp
