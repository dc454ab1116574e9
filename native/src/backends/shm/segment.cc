#include "backends/shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <new>

#include "core/error.h"

namespace spmd::shm {
namespace {

constexpr uint64_t kMagic = 0x73706d642d73686dull;  // "spmd-shm"
constexpr uint32_t kVersion = 2;

size_t roundUp(size_t v) { return (v + kCacheLine - 1) & ~(kCacheLine - 1); }

size_t doorbellsOffset() { return roundUp(sizeof(SegmentHeader)); }
size_t presenceOffset(int w, int lanes) { return doorbellsOffset() + roundUp(sizeof(Doorbell) * size_t(w) * lanes); }
size_t headsOffset(int w, int lanes) { return presenceOffset(w, lanes) + roundUp(sizeof(Presence) * size_t(w) * lanes); }
size_t dataOffset(int w, int lanes) { return headsOffset(w, lanes) + roundUp(sizeof(ChannelHead) * size_t(w) * w * lanes); }

void* mapFd(int fd, size_t bytes, const std::string& name) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) throwSystemError("shm: mmap " + name);
  return p;
}

}  // namespace

size_t Segment::layoutBytes(int w, int lanes, size_t channelBytes) {
  return dataOffset(w, lanes) + channelBytes * size_t(w) * w * lanes;
}

Segment::Segment(std::string name, void* base, size_t bytes, int w, int lanes, size_t channelBytes, bool owner)
    : name_(std::move(name)), base_(base), bytes_(bytes), worldSize_(w), lanes_(lanes),
      channelBytes_(channelBytes), owner_(owner) {}

Segment::Segment(Segment&& o) noexcept
    : name_(std::move(o.name_)), base_(o.base_), bytes_(o.bytes_), worldSize_(o.worldSize_), lanes_(o.lanes_),
      channelBytes_(o.channelBytes_), owner_(o.owner_) {
  o.base_ = nullptr;
  o.owner_ = false;
}

Segment::~Segment() {
  unlink();
  if (base_) munmap(base_, bytes_);
}

Segment Segment::create(const std::string& name, int w, int lanes, size_t channelBytes) {
  size_t bytes = layoutBytes(w, lanes, channelBytes);
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) throwSystemError("shm: create " + name);
  if (ftruncate(fd, off_t(bytes)) != 0) {
    close(fd);
    shm_unlink(name.c_str());
    throwSystemError("shm: size " + name);
  }
  void* base;
  try {
    base = mapFd(fd, bytes, name);
  } catch (...) {
    shm_unlink(name.c_str());
    throw;
  }
  Segment seg(name, base, bytes, w, lanes, channelBytes, true);
  // ftruncate zero-fills, which is a valid initial state for every atomic; only the header needs values.
  auto* h = new (base) SegmentHeader{};
  h->version = kVersion;
  h->worldSize = uint32_t(w);
  h->lanes = uint32_t(lanes);
  h->channelBytes = channelBytes;
  h->totalBytes = bytes;
  std::atomic_ref<uint64_t>(h->magic).store(kMagic, std::memory_order_release);
  return seg;
}

Segment Segment::attach(const std::string& name, int w, int lanes, size_t channelBytes) {
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) throwSystemError("shm: attach " + name);
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    close(fd);
    throwSystemError("shm: stat " + name);
  }
  size_t bytes = layoutBytes(w, lanes, channelBytes);
  if (size_t(st.st_size) != bytes) {
    close(fd);
    throw CommError(code::kInvalid, "shm: segment " + name + " has " + std::to_string(st.st_size) +
                                        " bytes, expected " + std::to_string(bytes) + " (ranks disagree on world size?)");
  }
  Segment seg(name, mapFd(fd, bytes, name), bytes, w, lanes, channelBytes, false);
  const SegmentHeader& h = seg.header();
  uint64_t magic = std::atomic_ref<const uint64_t>(h.magic).load(std::memory_order_acquire);
  if (magic != kMagic || h.version != kVersion || h.worldSize != uint32_t(w) || h.lanes != uint32_t(lanes)) {
    throw CommError(code::kInvalid, "shm: segment " + name + " does not match this job's layout");
  }
  return seg;
}

void Segment::unlink() {
  if (owner_) {
    shm_unlink(name_.c_str());
    owner_ = false;
  }
}

Doorbell& Segment::doorbell(int lane, int rank) const {
  auto* p = static_cast<uint8_t*>(base_) + doorbellsOffset();
  return reinterpret_cast<Doorbell*>(p)[size_t(lane) * worldSize_ + rank];
}

Presence& Segment::presence(int lane, int rank) const {
  auto* p = static_cast<uint8_t*>(base_) + presenceOffset(worldSize_, lanes_);
  return reinterpret_cast<Presence*>(p)[size_t(lane) * worldSize_ + rank];
}

ChannelHead& Segment::channel(int lane, int from, int to) const {
  auto* p = static_cast<uint8_t*>(base_) + headsOffset(worldSize_, lanes_);
  return reinterpret_cast<ChannelHead*>(p)[(size_t(lane) * worldSize_ + from) * worldSize_ + to];
}

uint8_t* Segment::channelData(int lane, int from, int to) const {
  auto* p = static_cast<uint8_t*>(base_) + dataOffset(worldSize_, lanes_);
  return p + ((size_t(lane) * worldSize_ + from) * worldSize_ + to) * channelBytes_;
}

}  // namespace spmd::shm
