// The flight recorder (runtime/flight_recorder.h) and the straggler text built from peers' positions
// (runtime/stragglers.h): the ring keeps the last 64 ops in order, a posted op ending late neither loses its
// entry nor moves the published position back, and the culprits named are the silent ranks, else the
// ones behind. Exits non-zero on a failure.
#include <cstdio>
#include <string>
#include <vector>

#include "base/error.h"
#include "runtime/flight_recorder.h"
#include "runtime/stragglers.h"

namespace {

using namespace spmd;

int failed = 0, passed = 0;

void check(bool ok, const std::string& what) {
  ok ? ++passed : ++failed;
  if (!ok) std::printf("FAIL %s\n", what.c_str());
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

void testRing() {
  FlightRecorder f;
  Presence seen;
  f.mirrorTo(&seen);
  for (int i = 0; i < 100; ++i) {
    uint64_t seq = f.issue();
    f.begin(seq, i, OpKind::AllReduce, "a stage name longer than thirty-one characters", 8);
    SendSpec s{1, nullptr, 8};
    RecvSpec r{2, nullptr, 8};
    f.notePeers({&s, 1}, {&r, 1});
    f.end(seq, OpState::Done);
  }
  std::vector<FlightEntry> e = f.entries();
  check(e.size() == FlightRecorder::kCapacity, "the ring keeps 64 entries");
  check(e.front().seq == 37 && e.back().seq == 100, "oldest first, the last 64");
  check(std::string(e.back().stage).size() == FlightEntry::kStageChars - 1, "stage names are truncated");
  check(e.back().toCount == 1 && e.back().to[0] == 1 && e.back().fromCount == 1 && e.back().from[0] == 2, "peers noted");
  check(seen.position.load() == (100u << 1), "the mirror shows op 100 ended");
}

void testPostedOpEndsLate() {
  FlightRecorder f;
  Presence seen;
  f.mirrorTo(&seen);
  f.begin(1, 0, OpKind::Gather, "posted", 4);
  f.begin(2, 0, OpKind::Barrier, "next", 0);
  check(seen.position.load() == ((2u << 1) | 1), "op 2 running");
  f.end(1, OpState::TimedOut);
  check(seen.position.load() == ((2u << 1) | 1), "ending op 1 late does not move the position back");
  check(f.entries().front().state == OpState::TimedOut, "the posted op's entry records how it ended");
  check(f.describe(1) == "stage posted, step 0", "describe names the stage and step");
  check(f.describe(7).empty(), "an op not recorded has no description");
  f.begin(3, 1, OpKind::Barrier, "(step start)", 0);
  check(f.describe(3) == "step start, step 1", "the runner's own ops are named without the parentheses");
}

void testStragglers() {
  FlightRecorder f;
  for (uint64_t seq = 1; seq <= 10; ++seq) {
    f.begin(seq, int(seq), OpKind::AllReduce, "ar", 4);
    if (seq < 10) f.end(seq, OpState::Done);
  }
  const uint64_t in10 = (10u << 1) | 1, done8 = 8u << 1, in11 = (11u << 1) | 1;
  std::vector<PeerSighting> peers = {{1, true, in10, 0.01, {}}, {2, true, done8, 0.02, {}}, {3, true, in11, 5, {}}};
  std::string text = describeStragglers(peers, f);
  check(contains(text, "rank 2 never reached it, done with op #8 (stage ar, step 8)"), "an alive rank behind is named: " + text);
  check(!contains(text, "rank 1") && !contains(text, "rank 3"), "ranks inside or past the op are not: " + text);
  peers.push_back({4, true, in10, 3.5, {}});
  text = describeStragglers(peers, f);
  check(contains(text, "rank 4 silent for 3.5 s, inside it") && !contains(text, "rank 2"), "a silent rank is the one named: " + text);
  peers.push_back({5, false, 0, -1, {}});
  text = describeStragglers(peers, f);
  check(contains(text, "rank 5 did not answer"), "an unanswered roll call names the rank: " + text);
  peers.push_back({6, false, 0, -1, "is unreachable (10.0.0.6:4000: No route to host)"});
  text = describeStragglers(peers, f);
  check(contains(text, "rank 6 is unreachable (10.0.0.6:4000: No route to host)"), "the asker's reason replaces the default words: " + text);
  // A rank that has exited is named only where no rank is silent: it most often left on finding the same fault.
  const PeerSighting exited{8, false, 0, -1, "is gone (10.0.0.8:4000 refused the roll call)", true};
  peers.push_back(exited);
  text = describeStragglers(peers, f);
  check(contains(text, "rank 5 did not answer") && !contains(text, "rank 8"), "a silent rank is named before a gone one: " + text);
  text = describeStragglers(std::vector<PeerSighting>{{2, true, done8, 0.02, {}}, exited}, f);
  check(contains(text, ": rank 8 is gone (10.0.0.8:4000 refused the roll call)") && !contains(text, "rank 2"), "with nobody silent, the gone rank is: " + text);
  check(describeStragglers(std::vector<PeerSighting>{{1, true, in10, 0.01, {}}}, f).empty(), "nobody to name: empty");
  text = describeStragglers(std::vector<PeerSighting>{{7, true, 0, 0.01, {}}}, f);
  check(contains(text, ": rank 7 has run no op yet"), "a rank at no op yet is named so: " + text);
}

void testFailedState() {
  check(failedState(CommError(code::kTimeout, "x")) == OpState::TimedOut, "timeout");
  check(failedState(CommError(code::kPeerGone, "x")) == OpState::PeerGone, "peer gone");
  check(failedState(CommError(code::kAborted, "x")) == OpState::Aborted, "aborted");
  check(failedState(std::runtime_error("x")) == OpState::Failed, "other errors");
}

}  // namespace

int main() {
  testRing();
  testPostedOpEndsLate();
  testStragglers();
  testFailedState();
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
