#include "backends/tcp/tcp_backend.h"

#include <algorithm>

#include "base/error.h"

namespace spmd::tcp {

namespace {

// A slot for the single-copy handshake: a record and a region per member, for thousands of members.
constexpr size_t kHandshakeBytes = 64 * 1024;

}  // namespace

size_t localChannelBytes(int members) {
  const size_t channels = size_t(members) * size_t(members) * kMaxLanes;
  // Whole 64 KiB: every channel starts on a page (3 ranks a host would get 932067 bytes otherwise).
  return std::clamp<size_t>((size_t(32) << 20) / channels, 256 * 1024, 2 << 20) & ~size_t(0xffff);
}

TcpBackend::TcpBackend(TcpOptions o)
    : rank_(o.rank), size_(o.size), key_(o.key), mac_(o.mac), listener_(std::move(o.listener)), nodeOf_(std::move(o.nodeOf)),
      localIndex_(size_t(o.size), -1) {
  if (!listener_) throw CommError(code::kInvalid, "tcp: the endpoint was already used by another communicator");
  if (nodeOf_.size() != size_t(size_)) throw CommError(code::kInvalid, "tcp: expected a node index for each of the " + std::to_string(size_) + " ranks");
  if (!o.local) return;
  int members = 0;
  for (int r = 0; r < size_; ++r) if (nodeOf_[size_t(r)] == nodeOf_[size_t(rank_)]) localIndex_[size_t(r)] = members++;
  const int me = localIndex_[size_t(rank_)];
  // Across hosts the shared algorithms do not apply: the channels carry local messages, and one small slot
  // per rank and lane holds the single-copy handshake.
  const size_t channelBytes = o.local->channelBytes ? o.local->channelBytes : localChannelBytes(members);
  const shm::Layout layout{members, kLanes, channelBytes, kHandshakeBytes, 1};
  local_ = std::move(*o.local);
  segment_.emplace(me == 0 ? shm::Segment::create(local_.name, layout, local_.tag) : shm::Segment::attach(local_.name, layout, local_.tag));
}

void TcpBackend::connect() {
  if (!listener_) throw CommError(code::kInvalid, "tcp: connect() was already called");
  std::vector<std::optional<SocketAddress>> peers = std::move(peers_);
  if (peers.size() != size_t(size_)) throw CommError(code::kInvalid, "tcp: expected an address entry for each of the " + std::to_string(size_) + " ranks");
  std::vector<std::string> names(peers.size());
  for (int r = 0; r < size_; ++r) {
    const bool tcpPeer = r != rank_ && localIndex_[size_t(r)] < 0;
    if (tcpPeer != peers[size_t(r)].has_value()) {
      throw CommError(code::kInvalid, "tcp: rank " + std::to_string(r) + (tcpPeer ? " needs an address" : " must not have an address (it is this rank or on this host)"));
    }
    if (tcpPeer) names[size_t(r)] = peers[size_t(r)]->toString();
  }
  std::vector<const Presence*> where;
  for (int lane = 0; lane < kLanes; ++lane) where.push_back(&presence(lane));
  rollCall_ = std::make_unique<RollCall>(rank_, size_, key_, mac_, peers);
  connector_ = std::make_unique<Connector>(std::move(listener_), ConnectorOptions{rank_, size_, kLanes, key_, mac_, std::move(peers), std::move(where)});
  std::vector<int> jobRanks;
  for (int r = 0; r < size_; ++r) if (localIndex_[size_t(r)] >= 0) jobRanks.push_back(r);
  for (int lane = 0; lane < kLanes; ++lane) {
    tcp_[lane] = std::make_unique<TcpTransport>(rank_, lane, *connector_, names, signal_);
    Transport* t = tcp_[lane].get();
    if (segment_) {
      shm_[lane] = std::make_unique<shm::ShmTransport>(*segment_, localIndex_[size_t(rank_)], lane, jobRanks);
      if (local_.sharesCores) shm_[lane]->shareCores(*local_.sharesCores);
      hybrid_[lane] = std::make_unique<HybridTransport>(rank_, localIndex_, *shm_[lane], *tcp_[lane]);
      t = hybrid_[lane].get();
    }
    collectives_[lane] = std::make_unique<TransportCollectives>(*t, [this, lane](const std::string& why) { abort(lane, why); }, nodeOf_);
    FlightRecorder& flight = collectives_[lane]->flight();
    flight.mirrorTo(&presence(lane));
    auto find = [this, lane] { return stragglers(lane); };
    tcp_[lane]->setStragglerFinder(find);
    if (!shm_[lane]) continue;
    shm_[lane]->setStragglerFinder(find);
    tcp_[lane]->setLifeSigns(&flight);
    shm_[lane]->setLifeSigns(&flight);
  }
  if (segment_) agreeSingleCopy();
}

void TcpBackend::agreeSingleCopy() {
  shm::ShmTransport& t = *shm_[0];
  t.setDeadline(Transport::Clock::now() + shm::kAgreeWithin);
  shm::Arena arena(*segment_, t, 0);
  staged_ = shm::SingleCopy(*segment_, arena).agree(local_.singleCopy);
  t.setDeadline(Transport::Clock::time_point::max());
  if (!staged_.empty()) return;
  for (auto& lane : shm_) lane->handOffFrom(from_.blocks);
}

Presence& TcpBackend::presence(int lane) {
  return segment_ ? segment_->presence(lane, localIndex_[size_t(rank_)]) : presence_[size_t(lane)];
}

std::string TcpBackend::stragglers(int lane) {
  // This host's ranks first, as they are now: during the roll call (up to a second) a rank of the host
  // whose deadline passed too is asking as well, and shows no sign of life meanwhile.
  std::vector<PeerSighting> seen = shm_[lane] ? shm_[lane]->sightings() : std::vector<PeerSighting>{};
  std::vector<PeerSighting> remote = rollCall_->call(lane);
  seen.insert(seen.end(), remote.begin(), remote.end());
  return describeStragglers(seen, collectives_[lane]->flight());
}

Collectives& TcpBackend::lane(int i) {
  if (!collectives_[i]) throw CommError(code::kInvalid, "tcp: the communicator is not connected (connect() failed or was not called)");
  return *collectives_[i];
}

void TcpBackend::abort(int lane, const std::string& reason) {
  if (shm_[lane]) shm_[lane]->abort(reason);
  tcp_[lane]->abort(reason);
}

}  // namespace spmd::tcp
