// Test double for Transport: W ranks as threads of one process. Every ordered pair of ranks has a bounded
// byte FIFO, deliberately tiny, so an algorithm that blocks on a send before posting the receive its peer
// needs deadlocks here as it would on a real transport; a stall deadline turns that deadlock into a
// CommError naming both ranks instead of a hung test.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "base/transport.h"

namespace spmd::testing {

class ThreadFabricDouble {
 public:
  ThreadFabricDouble(int size, size_t channelCapacity, std::chrono::milliseconds stallLimit);

  int size() const { return size_; }
  // Makes every rank that waits, or will wait, throw kAborted: once one rank has failed the others would
  // otherwise sit out the whole stall limit.
  void abort();
  // "" when every channel is empty, else which pair still holds bytes (a sender and receiver disagreed on
  // a size).
  std::string leftovers() const;

 private:
  friend class ThreadTransportDouble;
  struct Channel {
    std::vector<unsigned char> ring;
    size_t head = 0;
    size_t used = 0;
  };
  Channel& channel(int from, int to) { return channels_[size_t(from) * size_t(size_) + size_t(to)]; }

  int size_;
  std::chrono::milliseconds stallLimit_;
  mutable std::mutex mutex_;
  std::vector<std::condition_variable> wake_;  // per rank: something it may be waiting on changed
  std::vector<Channel> channels_;
  bool aborted_ = false;
};

class ThreadTransportDouble final : public Transport {
 public:
  ThreadTransportDouble(ThreadFabricDouble& fabric, int rank) : fabric_(fabric), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return fabric_.size(); }
  void exchange(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs) override;

 private:
  ThreadFabricDouble& fabric_;
  int rank_;
};

// Runs body(transport) for ranks 0..size-1 on their own threads. Returns one line per failed rank (empty
// when all succeeded), plus one if bytes were left in a channel.
std::vector<std::string> runRanksOnThreads(int size, size_t channelCapacity,
                                           const std::function<void(Transport&)>& body,
                                           std::chrono::milliseconds stallLimit = std::chrono::seconds(10));

}  // namespace spmd::testing
