// What travels on a tcp connection, byte by byte (little-endian, fixed sizes).
//
// Handshake: the dialling rank sends a Hello; the accepting rank checks it (magic, version, the job's key,
// that it is addressed to this rank) and only then answers with its own Hello, which the dialler checks
// the same way. A stranger without the key gets nothing back, not even an error, and no data ever flows
// on a connection before both Hellos were checked.
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

using Key = std::array<uint8_t, 32>;  // the job's key: sha-256 of a domain tag and the job token (JS)

inline constexpr uint16_t kWireVersion = 1;

struct Hello {
  int32_t from = 0;  // the sender's rank
  int32_t to = 0;    // the rank it means to reach
  int32_t worldSize = 0;
  uint16_t lane = 0;
  Key key{};
};
inline constexpr size_t kHelloBytes = 56;

void encodeHello(const Hello& h, uint8_t* out);
// nullopt on a wrong magic or version: not one of ours.
std::optional<Hello> decodeHello(const uint8_t* in);
// Constant time, so the reply timing does not leak how much of a guessed key was right.
bool sameKey(const Key& a, const Key& b);

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
