// How a rank's tcp connections come to be: on first use, so that a rank holds descriptors for the peers its
// algorithms talk to (2 for a ring, log W for a tree), not for all W. Before the ranks exchange addresses
// each one opens an Endpoint (a listening socket; the kernel picks the port). Then a Connector's thread
// serves the communicator's whole life: it dials the connections this rank's lanes ask for (the lower rank
// of a pair dials), accepts the ones lower ranks dial, each introduced by the Hello handshake of wire.h,
// and hands each to its lane. Accepting on a thread of its own means a dial is answered whatever this
// rank's lanes are doing, so connecting never waits on the order in which ranks reach their ops.
// Strangers and ranks of other jobs are dropped without a byte in reply, and cannot crowd out a rank's dial
// (the oldest unproven connection makes room for a new one); lost dials are retried. The same
// thread answers roll calls (roll_call.h), so a rank answers whatever its lanes are doing.
#pragma once
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backends/tcp/socket.h"
#include "backends/tcp/wire.h"
#include "runtime/flight_recorder.h"

namespace spmd::tcp {

class Endpoint {
 public:
  // Listens on `bind` with a backlog for `expectedPeers` connections at once.
  Endpoint(const SocketAddress& bind, int expectedPeers);
  const SocketAddress& address() const { return address_; }
  // The listening socket, for a Connector; the endpoint is spent afterwards.
  Fd takeListener() { return std::move(listener_); }

 private:
  Fd listener_;
  SocketAddress address_;
};

struct ConnectorOptions {
  int rank = 0;
  int size = 1;
  int lanes = 1;
  Key key{};
  MacFn mac = nullptr;  // the handshake's HMAC (wire.h)
  // Per rank: where it listens, for the ranks this one reaches over tcp; nullopt for itself and for ranks
  // it reaches otherwise (through shared memory). Every rank must agree on who has a tcp link with whom.
  std::vector<std::optional<SocketAddress>> peers;
  // Per lane: where this rank is, as a roll call is answered (missing lanes: at no op yet).
  std::vector<const Presence*> presence;
};

class Connector {
 public:
  Connector(Fd listener, ConnectorOptions o);
  ~Connector();
  Connector(const Connector&) = delete;
  Connector& operator=(const Connector&) = delete;

  bool reaches(int peer) const { return peer >= 0 && peer < o_.size && o_.peers[size_t(peer)].has_value(); }
  // The connection to `peer` on `lane`, tuned for the transport, once it is introduced; an empty Fd until
  // then. The first call asks for it, and the eventfd `wake` is signalled when it arrives. Throws a
  // CommError where it never will: the peer's listener is gone (kPeerGone) or another process answers
  // in its place (kInvalid).
  Fd take(int lane, int peer, int wake);
  // What the connection still waits for, for a deadline's message ("dialling 10.0.0.2:4000: ..."), and the
  // connections this rank closed because they never proved the job's secret, if any, and where from.
  std::string waitingFor(int lane, int peer) const;

 private:
  struct Slot {
    Fd fd;
    bool asked = false, taken = false;
    int wake = -1;
    std::string status, failure;  // failure: final, with its code
    const char* failureCode = nullptr;
  };
  struct Loop;

  Slot& slot(int lane, int peer) { return slots_[size_t(lane * o_.size + peer)]; }
  const Slot& slot(int lane, int peer) const { return slots_[size_t(lane * o_.size + peer)]; }
  // From the thread: a dial from `peer` on `lane` would be its first; the connection is introduced; it
  // never will be (every connection, when the thread itself failed); why it is not yet.
  bool fresh(int lane, int peer);
  void deliver(int lane, int peer, Fd fd);
  void fail(int lane, int peer, const char* code, const std::string& why);
  void failAll(const std::string& why);
  void note(int lane, int peer, const std::string& status);
  // A connection from host `from` was closed before it proved the key.
  void stranger(const std::string& from);
  static constexpr size_t kStrangerHostsShown = 3;

  const ConnectorOptions o_;
  Fd control_;  // an eventfd that wakes the thread for new dials and for shutdown
  mutable std::mutex mu_;
  std::vector<Slot> slots_;                // [lane * size + peer]
  std::vector<std::pair<int, int>> asked_;  // (lane, peer) asked for and not yet handed to the thread
  bool stopping_ = false;
  size_t strangers_ = 0;
  std::vector<std::string> strangerHosts_;  // distinct, the first kStrangerHostsShown
  bool strangerHostsMore_ = false;
  std::thread thread_;
};

}  // namespace spmd::tcp
