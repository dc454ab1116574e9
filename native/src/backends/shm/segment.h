// The POSIX shared-memory segment that ranks on one host exchange through. Rank 0 creates it, the others
// attach by name, and rank 0 unlinks the name as soon as everyone is attached, so a crash afterwards
// cannot leak it. The name comes to the others over the bootstrap, so it is not taken on trust: a rank
// attaches only to a segment its own user owns with mode 0600 whose header carries the job's tag (a MAC
// of the name under the job's secret, made in JS), and the creator reserves every page at once, so that a
// full /dev/shm is an error at creation rather than SIGBUS at the first touch (DESIGN.md, "Security").
//
// Layout: header | doorbells[lanes][W] | presence[lanes][W] | phase flags[lanes][W] |
//         channel heads[lanes][W][W] | channel data[lanes][W][W] | slots[lanes][W][slots]
// Channel (lane, from, to) is a single-producer single-consumer byte ring written by `from`: the
// point-to-point path the ring/tree/direct algorithms take. Slots are each rank's staging area for the
// "shared" algorithms, which read peers' data where it lies instead of copying it through a channel.
#pragma once
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/flight_recorder.h"

namespace spmd::shm {

inline constexpr size_t kCacheLine = 64;

// What proves a segment is the job's: HMAC-SHA-256 of its name under the job's secret (comm/secret.ts).
using Tag = std::array<uint8_t, 32>;

struct alignas(kCacheLine) Doorbell {
  std::atomic<uint32_t> seq;       // bumped whenever a peer made progress this rank may wait for
  std::atomic<uint32_t> sleepers;  // >0 while the owner sleeps on seq: wakers skip the syscall otherwise
  std::atomic<int32_t> pid;        // lets peers tell a dead rank from a slow one
};

// How many steps of the shared algorithms a rank has finished on a lane; peers wait for it to reach a value.
struct alignas(kCacheLine) PhaseFlag {
  std::atomic<uint64_t> phase;
};

struct ChannelHead {
  alignas(kCacheLine) std::atomic<uint64_t> head;  // bytes written, owned by the sender
  alignas(kCacheLine) std::atomic<uint64_t> tail;  // bytes read, owned by the receiver
  // Messages the receiver has read single-copy from the sender's memory, owned by the receiver: the
  // sender may reuse such a message's buffer once this counts it (ShmTransport's hand-offs).
  std::atomic<uint64_t> pulled;
};

struct alignas(kCacheLine) SegmentHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t worldSize;
  uint32_t lanes;
  uint64_t channelBytes;
  uint64_t slotBytes;
  uint32_t slots;
  uint64_t totalBytes;
  Tag tag;
  std::atomic<uint32_t> attached;
  std::atomic<uint32_t> aborted;  // 0, or 1 + the rank that aborted: the others stop waiting
  char abortReason[256];          // written by the aborting rank before it sets `aborted`
  // The line the start-up's core probe hands back and forth (core_probe.h), on a cache line of its own.
  alignas(kCacheLine) std::atomic<uint64_t> probe;
};

// A stretch of one rank's own memory, as it publishes it for peers to move single-copy (single_copy.h).
struct Region {
  uint64_t at = 0;
  uint64_t bytes = 0;
};
inline Region region(const void* at, size_t bytes) { return {uint64_t(reinterpret_cast<uintptr_t>(at)), bytes}; }

// Sized by chunks, not by messages: a message of any size passes through the same slots, so the segment
// (and what each rank maps of its peers) stays W * (W * channelBytes + slots * slotBytes) per lane.
struct Layout {
  int worldSize = 1;
  int lanes = 1;
  size_t channelBytes = 256 * 1024;
  size_t slotBytes = 256 * 1024;
  int slots = 4;
};

class Segment {
 public:
  // create: rank 0, fails if the name exists or /dev/shm cannot hold it. attach: the others, checks that
  // this user owns it with mode 0600, and that its tag and layout match.
  static Segment create(const std::string& name, const Layout& layout, const Tag& tag = {});
  static Segment attach(const std::string& name, const Layout& layout, const Tag& tag = {});
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
  PhaseFlag& phase(int lane, int rank) const;
  ChannelHead& channel(int lane, int from, int to) const;
  uint8_t* channelData(int lane, int from, int to) const;
  uint8_t* slot(int lane, int rank, int i) const;
  size_t channelBytes() const { return layout_.channelBytes; }
  size_t slotBytes() const { return layout_.slotBytes; }
  int slots() const { return layout_.slots; }
  int worldSize() const { return layout_.worldSize; }
  int lanes() const { return layout_.lanes; }
  const std::string& name() const { return name_; }

 private:
  // Byte offsets of each region in layout order, computed once: the accessors sit on the hot path.
  struct Regions {
    size_t doorbells, presence, phases, heads, data, slots, end;
  };
  static Regions regions(const Layout& layout);
  Segment(std::string name, void* base, size_t bytes, const Layout& layout, bool owner);
  uint8_t* at(size_t offset) const { return static_cast<uint8_t*>(base_) + offset; }

  std::string name_;
  void* base_;
  size_t bytes_;
  Layout layout_;
  Regions at_;
  bool owner_;  // the creator still holds the name
};

}  // namespace spmd::shm
