// Who is where, asked over tcp when a deadline passes. tcp ranks share no memory in which to watch each
// other's progress (as shm ranks do) and no library to ask (as MPI ranks do), so the rank whose deadline
// passed dials every tcp peer's listener with a roll-call Hello (wire.h), and the peer's connector thread
// answers with its place in each lane's op sequence. The connector answers whatever the lanes are doing:
// a peer that takes the connection and says nothing is stopped or wedged, one that cannot be reached is
// behind a link that went down, one that refuses has exited. Each question is a connection of its own,
// closed once answered, and a few at a time, so the roll call holds no descriptors while the job runs.
#pragma once
#include <mutex>
#include <optional>
#include <vector>

#include "backends/tcp/socket.h"
#include "backends/tcp/wire.h"
#include "runtime/stragglers.h"

namespace spmd::tcp {

class RollCall {
 public:
  // `peers[r]`: where rank r listens, for the ranks asked over tcp (nullopt for the others).
  RollCall(int rank, int size, Key key, MacFn mac, std::vector<std::optional<SocketAddress>> peers);

  // Asks every tcp peer, for at most a second; per peer, what it answered about `lane`. Once per process:
  // a second call (another lane's deadline) gets the first call's answers.
  std::vector<PeerSighting> call(int lane);

 private:
  struct Answer {
    int rank = 0;
    std::optional<Positions> where;
    std::string unanswered;  // why not, where `where` is empty
    bool gone = false;       // it refused: it has exited
  };
  class Asking;

  int rank_, size_;
  Key key_;
  MacFn mac_;
  std::vector<std::optional<SocketAddress>> peers_;
  std::mutex mu_;
  std::optional<std::vector<Answer>> answers_;
};

}  // namespace spmd::tcp
