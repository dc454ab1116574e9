// The POSIX shared-memory segment that ranks on one host exchange through. Rank 0 creates it, the others
// attach by name, and rank 0 unlinks the name as soon as everyone is attached, so a crash afterwards
// cannot leak it.
//
// Layout: header | doorbells[lanes][W] | presence[lanes][W] | channel heads[lanes][W][W] |
//         channel data[lanes][W][W]
// Channel (lane, from, to) is a single-producer single-consumer byte ring written by `from`.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/flight_recorder.h"

namespace spmd::shm {

inline constexpr size_t kCacheLine = 64;

struct alignas(kCacheLine) Doorbell {
  std::atomic<uint32_t> seq;       // bumped whenever a peer made progress this rank may wait for
  std::atomic<uint32_t> sleepers;  // >0 while the owner sleeps on seq: wakers skip the syscall otherwise
  std::atomic<int32_t> pid;        // lets peers tell a dead rank from a slow one
};

struct ChannelHead {
  alignas(kCacheLine) std::atomic<uint64_t> head;  // bytes written, owned by the sender
  alignas(kCacheLine) std::atomic<uint64_t> tail;  // bytes read, owned by the receiver
};

struct alignas(kCacheLine) SegmentHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t worldSize;
  uint32_t lanes;
  uint64_t channelBytes;
  uint64_t totalBytes;
  std::atomic<uint32_t> attached;
  std::atomic<uint32_t> aborted;  // 0, or 1 + the rank that aborted: the others stop waiting
  char abortReason[256];          // written by the aborting rank before it sets `aborted`
};

class Segment {
 public:
  // create: rank 0, fails if the name exists. attach: the others, checks the layout matches.
  static Segment create(const std::string& name, int worldSize, int lanes, size_t channelBytes);
  static Segment attach(const std::string& name, int worldSize, int lanes, size_t channelBytes);
  Segment(Segment&& o) noexcept;
  Segment& operator=(Segment&&) = delete;
  Segment(const Segment&) = delete;
  ~Segment();

  // Removes the name (idempotent); the mapping stays valid for everyone attached.
  void unlink();

  SegmentHeader& header() const { return *static_cast<SegmentHeader*>(base_); }
  Doorbell& doorbell(int lane, int rank) const;
  // Where rank `rank` is in lane `lane`'s op sequence, for peers whose deadline passes.
  Presence& presence(int lane, int rank) const;
  ChannelHead& channel(int lane, int from, int to) const;
  uint8_t* channelData(int lane, int from, int to) const;
  size_t channelBytes() const { return channelBytes_; }
  int worldSize() const { return worldSize_; }
  int lanes() const { return lanes_; }
  const std::string& name() const { return name_; }

 private:
  Segment(std::string name, void* base, size_t bytes, int worldSize, int lanes, size_t channelBytes, bool owner);
  static size_t layoutBytes(int worldSize, int lanes, size_t channelBytes);

  std::string name_;
  void* base_;
  size_t bytes_;
  int worldSize_;
  int lanes_;
  size_t channelBytes_;
  bool owner_;  // the creator still holds the name
};

}  // namespace spmd::shm
