// How a rank's tcp connections come to be. Before the ranks exchange addresses each one opens an Endpoint
// (a listening socket; the kernel picks the port). Then connectMesh() dials every higher tcp peer and
// accepts every lower one, `lanes` connections per pair, each introduced by the Hello handshake of wire.h.
// Strangers and ranks of other jobs are dropped without a byte in reply; refused or lost dials are retried
// until the deadline, which ends the setup with an error naming every peer still missing.
#pragma once
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "backends/tcp/socket.h"
#include "backends/tcp/wire.h"

namespace spmd::tcp {

class Endpoint {
 public:
  // Listens on `bind` with a backlog for `expectedPeers` connections at once.
  Endpoint(const SocketAddress& bind, int expectedPeers);
  const SocketAddress& address() const { return address_; }
  // The listening socket, for connectMesh(); the endpoint is spent afterwards.
  Fd takeListener() { return std::move(listener_); }

 private:
  Fd listener_;
  SocketAddress address_;
};

struct MeshOptions {
  int rank = 0;
  int size = 1;
  int lanes = 1;
  Key key{};
  // Per rank: where it listens, for the ranks this one reaches over tcp; nullopt for itself and for ranks
  // it reaches otherwise (through shared memory). Every rank must agree on who has a tcp link with whom.
  std::vector<std::optional<SocketAddress>> peers;
  std::chrono::steady_clock::time_point deadline;
};

// Connected sockets by [lane][peer] (an empty Fd where there is no tcp link), tuned for the transport.
using Links = std::vector<std::vector<Fd>>;

Links connectMesh(Fd listener, const MeshOptions& o);

}  // namespace spmd::tcp
