// What travels on a tcp connection, byte by byte (little-endian, fixed sizes).
//
// Handshake, a challenge-response (DESIGN.md, "Security"): the accepting rank sends a Challenge (a fresh
// nonce); the dialling rank answers with a Hello whose MAC (HMAC-SHA-256 under the job's key) covers that
// nonce, the Hello's fields and a nonce of its own; the accepting rank checks it (magic, version, the MAC,
// that it is addressed to this rank) and only then answers with its own Hello, whose MAC covers the
// dialler's nonce, which the dialler checks the same way. The key never travels; a stranger without it gets
// nothing back but the challenge, and no data ever flows on a connection before both Hellos were checked.
//
// Roll call: a Hello on lane kRollCallLane asks a rank where it is (tcp/roll_call.h). The rank's connector
// answers with its own Hello and a Positions record, then closes; nothing else flows on that connection.
//
// Data: a message of n bytes travels as ceil(n / kChunkBytes) frames, each a FrameHeader and up to
// kChunkBytes of payload. Every header repeats the message's sequence number (per ordered pair and lane),
// its size and the chunk's offset, so a peer that is out of step (another op, another size) is caught at
// the first header instead of having its bytes read as someone else's. An abort notice is a frame of its
// own kind whose payload is the reason.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace spmd::tcp {

// The job's key: HMAC-SHA-256 of the job's secret and the agreed job (comm/secret.ts); never sent.
using Key = std::array<uint8_t, 32>;
using Nonce = std::array<uint8_t, 32>;
using Mac = std::array<uint8_t, 32>;
// HMAC-SHA-256 of `n` bytes under `key`. The addon gives OpenSSL's, so that this floor links no crypto
// library (and builds where none is, as the aarch64 cross build of the C++ tests).
using MacFn = Mac (*)(const Key& key, const uint8_t* bytes, size_t n);

inline constexpr uint16_t kWireVersion = 2;

// The accepting side's first bytes: the nonce the dialler's Hello must cover.
inline constexpr size_t kChallengeBytes = 40;
void encodeChallenge(const Nonce& n, uint8_t* out);
// nullopt on a wrong magic or version: not one of ours.
std::optional<Nonce> decodeChallenge(const uint8_t* in);
// From the kernel's random source (getrandom).
Nonce freshNonce();

struct Hello {
  int32_t from = 0;  // the sender's rank
  int32_t to = 0;    // the rank it means to reach
  int32_t worldSize = 0;
  uint16_t lane = 0;
  Nonce nonce{};  // the dialler's, which the answer's MAC covers (unused in an answer)
  Mac mac{};      // helloMac of the other side's nonce
};
inline constexpr size_t kHelloBytes = 88;

void encodeHello(const Hello& h, uint8_t* out);
// nullopt on a wrong magic or version: not one of ours.
std::optional<Hello> decodeHello(const uint8_t* in);
// What `h`'s MAC must be: under `key`, of the other side's nonce `theirs`, whether it answers a dial, and
// the Hello's fields, so that a proof is good for one connection and one claim.
Mac helloMac(MacFn mac, const Key& key, const Nonce& theirs, const Hello& h, bool answer);
// The dialler's answer to `challenge` (kChallengeBytes as read): `h` with a fresh nonce of its own and its
// MAC; nullopt where the challenge is not one of ours.
std::optional<Hello> answerChallenge(MacFn mac, const Key& key, const uint8_t* challenge, Hello h);
// Sends `h` on a connection whose peer waits for it (its send buffer is empty, so it goes at once or the
// connection is broken); false with errno set if it did not.
bool sendHello(int fd, const Hello& h);
// Whether `h` proves the key against our nonce `ours`, in constant time.
bool proves(MacFn mac, const Key& key, const Nonce& ours, const Hello& h, bool answer);

inline constexpr uint16_t kRollCallLane = 0xffff;
// A roll call's answer: the answering rank's Presence::position on each lane (runtime/flight_recorder.h).
inline constexpr size_t kWireLanes = 4;
using Positions = std::array<uint64_t, kWireLanes>;
inline constexpr size_t kPositionsBytes = 8 * kWireLanes;
void encodePositions(const Positions& p, uint8_t* out);
Positions decodePositions(const uint8_t* in);

enum class FrameKind : uint32_t { Data = 1, Abort = 2 };

struct FrameHeader {
  FrameKind kind = FrameKind::Data;
  uint64_t seq = 0;     // Data: the message's number on this pair and lane, from 0
  uint64_t total = 0;   // Data: the message's size; Abort: the reason's length
  uint64_t offset = 0;  // Data: where this chunk starts in the message
};
inline constexpr size_t kFrameHeaderBytes = 32;
inline constexpr size_t kChunkBytes = 256 * 1024;
// Longer reasons are cut: the notice must fit any socket buffer at once.
inline constexpr size_t kMaxAbortReason = 1024;

void encodeFrame(const FrameHeader& h, uint8_t* out);
// nullopt on a wrong magic or an unknown kind.
std::optional<FrameHeader> decodeFrame(const uint8_t* in);

}  // namespace spmd::tcp
