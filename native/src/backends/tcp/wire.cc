#include "backends/tcp/wire.h"

#include <endian.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <cstring>

#include "base/error.h"
#include "base/same_bytes.h"

namespace spmd::tcp {
namespace {

constexpr uint32_t kHelloMagic = 0x48444d53;  // "SMDH" read little-endian: spmd hello
constexpr uint32_t kFrameMagic = 0x46444d53;  // "SMDF": spmd frame
constexpr uint32_t kChallengeMagic = 0x43444d53;  // "SMDC": spmd challenge

void put16(uint8_t* p, uint16_t v) { v = htole16(v); std::memcpy(p, &v, 2); }
void put32(uint8_t* p, uint32_t v) { v = htole32(v); std::memcpy(p, &v, 4); }
void put64(uint8_t* p, uint64_t v) { v = htole64(v); std::memcpy(p, &v, 8); }
uint16_t get16(const uint8_t* p) { uint16_t v; std::memcpy(&v, p, 2); return le16toh(v); }
uint32_t get32(const uint8_t* p) { uint32_t v; std::memcpy(&v, p, 4); return le32toh(v); }
uint64_t get64(const uint8_t* p) { uint64_t v; std::memcpy(&v, p, 8); return le64toh(v); }

// Challenge layout: magic u32 | version u16 | reserved u16 | nonce[32]
// Hello layout: magic u32 | version u16 | lane u16 | from i32 | to i32 | worldSize i32 | reserved u32 | nonce[32] | mac[32]
// Frame layout: magic u32 | kind u32 | seq u64 | total u64 | offset u64

}  // namespace

void encodeChallenge(const Nonce& n, uint8_t* out) {
  std::memset(out, 0, kChallengeBytes);
  put32(out, kChallengeMagic);
  put16(out + 4, kWireVersion);
  std::memcpy(out + 8, n.data(), n.size());
}

std::optional<Nonce> decodeChallenge(const uint8_t* in) {
  if (get32(in) != kChallengeMagic || get16(in + 4) != kWireVersion) return std::nullopt;
  Nonce n;
  std::memcpy(n.data(), in + 8, n.size());
  return n;
}

Nonce freshNonce() {
  Nonce n;
  if (getrandom(n.data(), n.size(), 0) != ssize_t(n.size())) throwSystemError("tcp: getrandom");
  return n;
}

void encodeHello(const Hello& h, uint8_t* out) {
  std::memset(out, 0, kHelloBytes);
  put32(out, kHelloMagic);
  put16(out + 4, kWireVersion);
  put16(out + 6, h.lane);
  put32(out + 8, uint32_t(h.from));
  put32(out + 12, uint32_t(h.to));
  put32(out + 16, uint32_t(h.worldSize));
  std::memcpy(out + 24, h.nonce.data(), h.nonce.size());
  std::memcpy(out + 56, h.mac.data(), h.mac.size());
}

std::optional<Hello> decodeHello(const uint8_t* in) {
  if (get32(in) != kHelloMagic || get16(in + 4) != kWireVersion) return std::nullopt;
  Hello h;
  h.lane = get16(in + 6);
  h.from = int32_t(get32(in + 8));
  h.to = int32_t(get32(in + 12));
  h.worldSize = int32_t(get32(in + 16));
  std::memcpy(h.nonce.data(), in + 24, h.nonce.size());
  std::memcpy(h.mac.data(), in + 56, h.mac.size());
  return h;
}

Mac helloMac(MacFn mac, const Key& key, const Nonce& theirs, const Hello& h, bool answer) {
  static constexpr char kRole[2][24] = {"spmd-runner tcp dial", "spmd-runner tcp answer"};
  uint8_t msg[sizeof kRole[0] + 32 + 14];
  std::memcpy(msg, kRole[answer], sizeof kRole[0]);
  uint8_t* p = msg + sizeof kRole[0];
  std::memcpy(p, theirs.data(), theirs.size());
  put32(p + 32, uint32_t(h.from));
  put32(p + 36, uint32_t(h.to));
  put32(p + 40, uint32_t(h.worldSize));
  put16(p + 44, h.lane);
  return mac(key, msg, sizeof msg);
}

std::optional<Hello> answerChallenge(MacFn mac, const Key& key, const uint8_t* challenge, Hello h) {
  std::optional<Nonce> theirs = decodeChallenge(challenge);
  if (!theirs) return std::nullopt;
  h.nonce = freshNonce();
  h.mac = helloMac(mac, key, *theirs, h, false);
  return h;
}

bool sendHello(int fd, const Hello& h) {
  uint8_t out[kHelloBytes];
  encodeHello(h, out);
  return send(fd, out, kHelloBytes, MSG_NOSIGNAL) == ssize_t(kHelloBytes);
}

bool proves(MacFn mac, const Key& key, const Nonce& ours, const Hello& h, bool answer) {
  return sameBytes(h.mac, helloMac(mac, key, ours, h, answer));
}

void encodePositions(const Positions& p, uint8_t* out) {
  for (size_t i = 0; i < p.size(); ++i) put64(out + 8 * i, p[i]);
}

Positions decodePositions(const uint8_t* in) {
  Positions p;
  for (size_t i = 0; i < p.size(); ++i) p[i] = get64(in + 8 * i);
  return p;
}

void encodeFrame(const FrameHeader& h, uint8_t* out) {
  put32(out, kFrameMagic);
  put32(out + 4, uint32_t(h.kind));
  put64(out + 8, h.seq);
  put64(out + 16, h.total);
  put64(out + 24, h.offset);
}

std::optional<FrameHeader> decodeFrame(const uint8_t* in) {
  if (get32(in) != kFrameMagic) return std::nullopt;
  uint32_t kind = get32(in + 4);
  if (kind != uint32_t(FrameKind::Data) && kind != uint32_t(FrameKind::Abort)) return std::nullopt;
  return FrameHeader{FrameKind(kind), get64(in + 8), get64(in + 16), get64(in + 24)};
}

}  // namespace spmd::tcp
