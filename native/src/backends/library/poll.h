// How the library layer waits for a stream without blocking in the vendor's runtime: a few yields catch
// fast completions; past them each wait sleeps, doubling up to a millisecond, so a rank waiting for a slow
// peer leaves the core to others (ranks may share few cores).
#pragma once

namespace spmd::library {

// The pause before poll number `attempt` (0, 1, ...) of the same wait.
void pollPause(int attempt);

}  // namespace spmd::library
