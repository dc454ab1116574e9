// The point-to-point interface every collective algorithm is written against (Gloo's pair/buffer idea,
// reduced to what the algorithms need). shm and tcp implement it; so does the threaded double in tests.
#pragma once
#include <chrono>
#include <cstddef>
#include <functional>
#include <span>
#include <string>

#include "base/error.h"

namespace spmd {

class FlightRecorder;

struct SendSpec {
  int peer;
  const void* data;
  size_t bytes;
};

struct RecvSpec {
  int peer;
  void* data;
  size_t bytes;
};

// What a transport over two kinds of link (shm within the host, tcp between) moved over each: bytes this
// rank sent and microseconds its exchanges spent on each half, since it started. `split`: it has two kinds.
struct LinkUsage {
  bool split = false;
  uint64_t shmBytes = 0, tcpBytes = 0;
  double shmUs = 0, tcpUs = 0;
};

class Transport {
 public:
  using Clock = std::chrono::steady_clock;

  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Moves every listed message concurrently and returns once all have completed. Bytes between one
  // ordered pair of ranks are FIFO, so a sender and its receiver only have to agree on the sizes; several
  // messages to (from) one peer in one exchange move one after the other, in the order listed.
  // Zero-byte entries complete at once and synchronise nothing. Throws CommError on a deadline or a
  // dead peer; the message names the peer.
  virtual void exchange(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs) = 0;
  // Messages must match one to one: the k-th message from a rank to a peer has the size of the peer's k-th
  // receive from that rank (tcp checks this and names a peer that is out of step).

  void send(int peer, const void* data, size_t bytes) {
    SendSpec s{peer, data, bytes};
    exchange({&s, 1}, {});
  }
  void recv(int peer, void* data, size_t bytes) {
    RecvSpec r{peer, data, bytes};
    exchange({}, {&r, 1});
  }
  void sendRecv(int to, const void* sdata, size_t sbytes, int from, void* rdata, size_t rbytes) {
    SendSpec s{to, sdata, sbytes};
    RecvSpec r{from, rdata, rbytes};
    exchange({&s, 1}, {&r, 1});
  }

  // Every exchange after this throws kTimeout once the deadline passes (set per op by the communicator).
  // Virtual so that a view of another transport (algorithms/group_transport.h) can share that one's deadline.
  virtual void setDeadline(Clock::time_point d) { deadline_ = d; }
  // The lane's recorder: each exchange notes its peers there, and a deadline's error asks it which op
  // this rank is in. Optional (tests drive transports without one; a group's view leaves it to the
  // transport it forwards to).
  void setRecorder(FlightRecorder* r) { flight_ = lifeSigns_ = r; }
  // Where a waiting transport shows it is alive, without noting peers there: each half of a hybrid,
  // whose peers the hybrid notes in job ranks, and whose waits the ranks of its host must still see.
  void setLifeSigns(FlightRecorder* r) { lifeSigns_ = r; }
  // What a deadline's message adds about the peers holding the op up ("; holding up op #8 ...: rank 2
  // did not answer"), as the backend can see them: a transport sees only its own peers, and a hybrid's
  // two halves must name every rank alike. Unset: nothing.
  void setStragglerFinder(std::function<std::string()> find) { findStragglers_ = std::move(find); }
  virtual LinkUsage linkUsage() const { return {}; }

 protected:
  std::string stragglers() const { return findStragglers_ ? findStragglers_() : std::string(); }

  Clock::time_point deadline_ = Clock::time_point::max();
  FlightRecorder* flight_ = nullptr;
  FlightRecorder* lifeSigns_ = nullptr;

 private:
  std::function<std::string()> findStragglers_;
};

// Thrown by an exchange that interrupt() ended: not a failure of its own, but of whoever interrupted it.
class Interrupted : public CommError {
 public:
  Interrupted() : CommError(code::kAborted, "interrupted") {}
};

// A transport whose wait in exchange() another thread can end: the hybrid transport runs two exchanges at
// once and must stop one when the other fails, before the caller's buffers go away.
class InterruptibleTransport : public Transport {
 public:
  // Any thread: the exchange under way, and every later one, throws Interrupted promptly. Final, like the
  // failure that calls for it: the communicator aborts next.
  virtual void interrupt() = 0;
};

}  // namespace spmd
