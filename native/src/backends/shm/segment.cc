#include "backends/shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <new>

#include "base/error.h"
#include "base/same_bytes.h"

namespace spmd::shm {
namespace {

constexpr uint64_t kMagic = 0x73706d642d73686dull;  // "spmd-shm"
constexpr uint32_t kVersion = 6;
// Where glibc's shm_open puts its names.
constexpr const char* kShmDir = "/dev/shm";

size_t roundUp(size_t v) { return (v + kCacheLine - 1) & ~(kCacheLine - 1); }

// The one line a full /dev/shm gets: what was asked, what is free, and what to do.
[[noreturn]] void throwNoRoom(size_t bytes) {
  struct statvfs fs {};
  std::string free = statvfs(kShmDir, &fs) == 0 ? std::to_string(uint64_t(fs.f_bavail) * fs.f_frsize) : "an unknown number of";
  throw CommError(code::kNoMem, std::string("shm: ") + kShmDir + " cannot hold the job's segment: it needs " + std::to_string(bytes) +
                                    " bytes and " + free + " bytes are free (df " + kShmDir +
                                    "); free some, or run with --backend tcp or fewer ranks");
}

// A segment this user did not make, or made readable by others, is not one of ours, whatever its name.
void checkOwner(int fd, const struct stat& st, const std::string& name) {
  if (st.st_uid == geteuid() && (st.st_mode & 07777) == 0600) return;
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", unsigned(st.st_mode & 07777));
  close(fd);
  throw CommError(code::kInvalid, "shm: segment " + name + " is not this job's: owned by uid " + std::to_string(st.st_uid) + " with mode " + mode +
                                      ", not by uid " + std::to_string(geteuid()) + " with mode 0600");
}

void* mapFd(int fd, size_t bytes, const std::string& name) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) throwSystemError("shm: mmap " + name);
  return p;
}

}  // namespace

Segment::Regions Segment::regions(const Layout& l) {
  const size_t w = size_t(l.worldSize), lanes = size_t(l.lanes);
  Regions r{};
  r.doorbells = roundUp(sizeof(SegmentHeader));
  r.presence = r.doorbells + roundUp(sizeof(Doorbell) * w * lanes);
  r.phases = r.presence + roundUp(sizeof(Presence) * w * lanes);
  r.heads = r.phases + roundUp(sizeof(PhaseFlag) * w * lanes);
  r.data = r.heads + roundUp(sizeof(ChannelHead) * w * w * lanes);
  r.slots = r.data + roundUp(l.channelBytes * w * w * lanes);
  r.end = r.slots + roundUp(l.slotBytes) * size_t(l.slots) * w * lanes;
  return r;
}

Segment::Segment(std::string name, void* base, size_t bytes, const Layout& layout, bool owner)
    : name_(std::move(name)), base_(base), bytes_(bytes), layout_(layout), at_(regions(layout)), owner_(owner) {
  layout_.slotBytes = roundUp(layout_.slotBytes);
}

Segment::Segment(Segment&& o) noexcept
    : name_(std::move(o.name_)), base_(o.base_), bytes_(o.bytes_), layout_(o.layout_), at_(o.at_), owner_(o.owner_) {
  o.base_ = nullptr;
  o.owner_ = false;
}

Segment::~Segment() {
  unlink();
  if (base_) munmap(base_, bytes_);
}

Segment Segment::create(const std::string& name, const Layout& layout, const Tag& tag) {
  size_t bytes = regions(layout).end;
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) throwSystemError("shm: create " + name);
  // Sizes the segment and reserves its pages before any rank touches one: a tmpfs without room fails here
  // instead of killing whichever rank first writes a page it has no room for.
  if (int err = posix_fallocate(fd, 0, off_t(bytes)); err != 0) {
    close(fd);
    shm_unlink(name.c_str());
    if (err == ENOSPC) throwNoRoom(bytes);
    errno = err;
    throwSystemError("shm: reserve " + name);
  }
  void* base;
  try {
    base = mapFd(fd, bytes, name);
  } catch (...) {
    shm_unlink(name.c_str());
    throw;
  }
  Segment seg(name, base, bytes, layout, true);
  // The pages come zero-filled, which is a valid initial state for every atomic; only the header needs values.
  auto* h = new (base) SegmentHeader{};
  h->tag = tag;
  h->version = kVersion;
  h->worldSize = uint32_t(layout.worldSize);
  h->lanes = uint32_t(layout.lanes);
  h->channelBytes = layout.channelBytes;
  h->slotBytes = seg.slotBytes();
  h->slots = uint32_t(layout.slots);
  h->totalBytes = bytes;
  std::atomic_ref<uint64_t>(h->magic).store(kMagic, std::memory_order_release);
  return seg;
}

Segment Segment::attach(const std::string& name, const Layout& layout, const Tag& tag) {
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) throwSystemError("shm: attach " + name);
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    close(fd);
    throwSystemError("shm: stat " + name);
  }
  checkOwner(fd, st, name);
  size_t bytes = regions(layout).end;
  if (size_t(st.st_size) != bytes) {
    close(fd);
    throw CommError(code::kInvalid, "shm: segment " + name + " has " + std::to_string(st.st_size) +
                                        " bytes, expected " + std::to_string(bytes) + " (ranks disagree on world size?)");
  }
  Segment seg(name, mapFd(fd, bytes, name), bytes, layout, false);
  const SegmentHeader& h = seg.header();
  uint64_t magic = std::atomic_ref<const uint64_t>(h.magic).load(std::memory_order_acquire);
  if (magic == kMagic && h.version == kVersion && !sameBytes(h.tag, tag)) {
    throw CommError(code::kInvalid, "shm: segment " + name + " is not this job's: its tag does not match the job's secret");
  }
  if (magic != kMagic || h.version != kVersion || h.worldSize != uint32_t(layout.worldSize) ||
      h.lanes != uint32_t(layout.lanes) || h.channelBytes != layout.channelBytes || h.slotBytes != seg.slotBytes() ||
      h.slots != uint32_t(layout.slots)) {
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
  auto* p = at(at_.doorbells);
  return reinterpret_cast<Doorbell*>(p)[size_t(lane) * worldSize() + rank];
}

Presence& Segment::presence(int lane, int rank) const {
  auto* p = at(at_.presence);
  return reinterpret_cast<Presence*>(p)[size_t(lane) * worldSize() + rank];
}

PhaseFlag& Segment::phase(int lane, int rank) const {
  auto* p = at(at_.phases);
  return reinterpret_cast<PhaseFlag*>(p)[size_t(lane) * worldSize() + rank];
}

ChannelHead& Segment::channel(int lane, int from, int to) const {
  auto* p = at(at_.heads);
  return reinterpret_cast<ChannelHead*>(p)[(size_t(lane) * worldSize() + from) * worldSize() + to];
}

uint8_t* Segment::channelData(int lane, int from, int to) const {
  auto* p = at(at_.data);
  return p + ((size_t(lane) * worldSize() + from) * worldSize() + to) * channelBytes();
}

uint8_t* Segment::slot(int lane, int rank, int i) const {
  auto* p = at(at_.slots);
  return p + ((size_t(lane) * worldSize() + rank) * size_t(slots()) + size_t(i)) * slotBytes();
}

}  // namespace spmd::shm
