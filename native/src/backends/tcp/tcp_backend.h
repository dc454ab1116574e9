// The tcp backend: kMaxLanes lanes (one per stream) of tcp connections, each lane a TcpTransport
// under the shared algorithms. With a local group (backend "auto" on hosts that hold several ranks) the
// ranks of this host talk through a shm segment instead, and each lane is a HybridTransport over both:
// "shm+tcp". Started in two steps: the constructor sets up what is local (the listener the endpoint
// opened, the segment), connect() then starts the Connector, which opens each tcp connection on first use.
// A deadline names the ranks holding the op up from a roll call over tcp and, with a local group, from
// what the segment shows of this host's ranks.
#pragma once
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/hybrid/hybrid_transport.h"
#include "backends/shm/segment.h"
#include "backends/shm/shm_transport.h"
#include "backends/shm/single_copy.h"
#include "backends/tcp/abort_signal.h"
#include "backends/tcp/connector.h"
#include "backends/tcp/roll_call.h"
#include "backends/tcp/tcp_transport.h"
#include "runtime/backend.h"
#include "runtime/transport_collectives.h"

namespace spmd::tcp {

// The segment the ranks of this host share.
struct LocalGroup {
  std::string name;  // POSIX shm name; the host's lowest rank creates it, the others attach
  shm::Tag tag{};     // what proves the segment is the job's (shm/segment.h)
  size_t channelBytes = 0;  // per channel; 0: localChannelBytes(members)
  // false: this rank stages every message (SPMD_SHM_SINGLE_COPY=0), and so, agreed at connect(), do all
  // the host's ranks.
  bool singleCopy = true;
  // This rank's CPUs are shared with other ranks of its machine (hosts in namespaces or containers of one
  // kernel count together); unset: judged from the host's ranks alone (ShmTransport).
  std::optional<bool> sharesCores;
};

// Channels that hold a 1 MiB slice of the ring or the hierarchical allreduce and more (2 MiB), so a slice
// goes without waiting for its reader to drain the channel, while the segment (members² channels per lane)
// stays within 32 MiB; never under 256 KiB. On 2 namespace hosts × 2 ranks the hierarchical 16 MiB
// allreduce took 28 and 33 ms with 2 MiB channels against 45 and 53 with 256 KiB (docs/PERFORMANCE.md).
size_t localChannelBytes(int members);

struct TcpOptions {
  int rank = 0;
  int size = 1;
  Key key{};
  MacFn mac = nullptr;  // the handshake's HMAC (wire.h)
  Fd listener;  // from the Endpoint whose address the other ranks were given
  std::vector<int> nodeOf;  // each rank's host (node) index
  std::optional<LocalGroup> local;  // with it, the ranks of this host talk over shm
};

class TcpBackend : public Backend {
 public:
  explicit TcpBackend(TcpOptions o);
  // Before connect(): `peers[r]` is where rank r listens, for every rank outside the local group (nullopt
  // for this rank and for the group).
  void expectPeers(std::vector<std::optional<SocketAddress>> peers) { peers_ = std::move(peers); }
  // On the progress thread: checks the peers and starts connecting (lazily: nothing is dialled yet).
  void connect() override;

  std::string name() const override { return segment_ ? "shm+tcp" : "tcp"; }
  // With a local group: whether its large messages move single-copy, as its ranks agreed at connect().
  std::string copyPath() const override { return segment_ ? shm::describeCopyPath(staged_, from_) : ""; }
  Collectives& lane(int i) override;
  int lanes() const override { return kLanes; }
  void release() override {
    if (segment_) segment_->unlink();
  }

 private:
  static constexpr int kLanes = kMaxLanes;
  void abort(int lane, const std::string& reason);
  // Collective among this host's ranks: whether they can read each other's memory, and if so the local
  // halves hand off their large messages (ShmTransport::handOffFrom).
  void agreeSingleCopy();
  // Where `lane` publishes its place in the op sequence.
  Presence& presence(int lane);
  // The deadline message's tail for `lane`: who holds its op up, among every other rank.
  std::string stragglers(int lane);

  int rank_, size_;
  Key key_;
  MacFn mac_;
  Fd listener_;
  std::vector<std::optional<SocketAddress>> peers_;
  std::vector<int> nodeOf_;
  std::vector<int> localIndex_;  // per job rank: its index in the segment, or -1
  std::optional<shm::Segment> segment_;
  LocalGroup local_;  // as given, with a segment
  std::string staged_ = "not agreed: connect() was not called";  // why local messages stage ("" once agreed)
  // Where they move single-copy: point-to-point hand-offs from kSingleCopyFromBytes, not timed (the shared
  // algorithms that the timing runs do not apply across hosts).
  const shm::SingleCopyFrom from_{shm::kSingleCopyFromBytes, SIZE_MAX, "messages within a host, not timed"};
  AbortSignal signal_;
  // Each lane's place, as this rank answers roll calls; with a local group the segment's slots are used
  // instead, where this host's ranks read it too.
  std::array<Presence, kLanes> presence_;
  std::unique_ptr<RollCall> rollCall_;
  std::unique_ptr<Connector> connector_;  // before the transports, which use it: destroyed after them
  std::unique_ptr<shm::ShmTransport> shm_[kLanes];
  std::unique_ptr<TcpTransport> tcp_[kLanes];
  std::unique_ptr<HybridTransport> hybrid_[kLanes];
  std::unique_ptr<TransportCollectives> collectives_[kLanes];
};

}  // namespace spmd::tcp
