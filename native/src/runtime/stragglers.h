// Who holds up an op whose deadline passed: from what each peer last showed of itself (its published
// position and sign of life on shm, its answer to a roll call on MPI), the ranks that never reached the
// op or went silent in it. The text goes into the deadline's error, so every rank names the same culprit.
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "runtime/flight_recorder.h"

namespace spmd {

struct PeerSighting {
  int rank = 0;
  bool answered = true;   // it answered the roll call (MPI, tcp: a stopped rank does not)
  uint64_t position = 0;  // Presence::position
  double silentSec = -1;  // since its last sign of life on any lane; negative when unknown
  // Why it did not answer, where the asker can tell ("is unreachable: ..."); empty: it stayed silent.
  std::string unanswered;
  // It refused the roll call: it has exited, most often after finding the same fault as the asker.
  bool gone = false;
};

// A peer silent this long while in the op is taken to be stopped, not waiting: waiting ranks show a sign
// of life at least every sleep slice (50 ms on shm).
inline constexpr double kSilentSec = 1.0;

// "; holding up op #812 (stage ar, step 40): rank 2 silent for 4.1 s, inside it" naming the silent ranks
// (no sign of life, or no answer), else the ranks that are gone, else the ranks that never reached the op this
// rank is in; "" when there are none. `mine` is this rank's own record, which also names the others' ops
// (every rank runs the same ops in the same order).
std::string describeStragglers(std::span<const PeerSighting> peers, const FlightRecorder& mine);

}  // namespace spmd
