#include "runtime/stragglers.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace spmd {
namespace {

constexpr size_t kNamed = 4;  // a message stays one readable line however many ranks are missing

std::string opText(uint64_t seq, const FlightRecorder& mine) {
  std::string where = mine.describe(seq);
  return "op #" + std::to_string(seq) + (where.empty() ? "" : " (" + where + ")");
}

std::string seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", s);
  return text;
}

}  // namespace

std::string describeStragglers(std::span<const PeerSighting> peers, const FlightRecorder& mine) {
  const uint64_t seq = mine.currentSeq();
  auto where = [&](const PeerSighting& p) -> std::string {
    const uint64_t at = positionSeq(p.position);
    if (p.position == 0) return "it has run no op yet";
    if (at == seq && positionInOp(p.position)) return "inside it";
    return std::string(at < seq ? "never reached it, " : "") + (positionInOp(p.position) ? "in " : "done with ") + opText(at, mine);
  };
  // A silent rank (stopped, or busy outside communication) is the cause; ranks that are alive but behind
  // are usually waiting on it, so they are named only when no rank is silent. Ranks that have exited mostly
  // left on finding the same silence (a stopped rank's neighbour on its host sees it first, in the segment),
  // so they are named only when no rank is silent either: then one of them is the culprit (killed, crashed).
  std::vector<std::string> silent, gone, behind;
  for (const PeerSighting& p : peers) {
    const std::string rank = "rank " + std::to_string(p.rank);
    if (p.gone) {
      gone.push_back(rank + " " + p.unanswered);
    } else if (!p.answered) {
      silent.push_back(rank + (p.unanswered.empty() ? " did not answer (stopped, or busy outside communication)" : " " + p.unanswered));
    } else if (positionSeq(p.position) <= seq && p.silentSec >= kSilentSec) {
      silent.push_back(rank + " silent for " + seconds(p.silentSec) + ", " + where(p));
    } else if (positionSeq(p.position) < seq) {
      behind.push_back(p.position == 0 ? rank + " has run no op yet" : rank + " " + where(p));
    }
  }
  const std::vector<std::string>& named = !silent.empty() ? silent : !gone.empty() ? gone : behind;
  if (named.empty()) return "";
  std::string text = "; holding up " + opText(seq, mine) + ": ";
  for (size_t i = 0; i < std::min(named.size(), kNamed); ++i) text += (i ? "; " : "") + named[i];
  if (named.size() > kNamed) text += "; and " + std::to_string(named.size() - kNamed) + " more";
  return text;
}

}  // namespace spmd
