// Collects the messages of one exchange so that an algorithm talking to many peers posts them all at once:
// on bounded channels, sending to one peer before receiving from another can deadlock.
#pragma once
#include <stdexcept>
#include <vector>

#include "base/transport.h"

namespace spmd::algo::detail {

// The lists are thread-local and only grow, so once warm a batch allocates nothing even though the direct
// algorithms' signatures carry no Workspace. One batch per thread at a time; a nested one would clobber it.
class PeerBatch {
 public:
  PeerBatch() : lists_(threadLists()) {
    if (lists_.inUse) throw std::logic_error("PeerBatch: nested batches on one thread");
    lists_.inUse = true;
    lists_.sends.clear();
    lists_.recvs.clear();
  }
  ~PeerBatch() { lists_.inUse = false; }
  PeerBatch(const PeerBatch&) = delete;
  PeerBatch& operator=(const PeerBatch&) = delete;

  void send(int peer, const void* data, size_t bytes) { lists_.sends.push_back({peer, data, bytes}); }
  void recv(int peer, void* data, size_t bytes) { lists_.recvs.push_back({peer, data, bytes}); }
  void run(Transport& t) { t.exchange(lists_.sends, lists_.recvs); }

 private:
  struct Lists {
    std::vector<SendSpec> sends;
    std::vector<RecvSpec> recvs;
    bool inUse = false;
  };
  static Lists& threadLists() {
    thread_local Lists lists;
    return lists;
  }
  Lists& lists_;
};

}  // namespace spmd::algo::detail
