#include "estimating/pieces.h"

#include <utility>
#include <vector>

namespace spmd {
namespace {

// Posts to the helper, or runs at once where there is none; waits for the last post however it leaves.
class Posts {
 public:
  explicit Posts(LaneWorker* worker) : worker_(worker) {}
  ~Posts() {
    try {
      finish();
    } catch (...) {  // the step's own error is the one to report
    }
  }
  uint64_t post(std::function<void()> work) {
    if (!worker_) {
      work();
      return 0;
    }
    return last_ = worker_->post(std::move(work));
  }
  void wait(uint64_t ticket) {
    if (worker_ && ticket) worker_->wait(ticket);
  }
  void finish() { wait(last_); }

 private:
  LaneWorker* worker_;
  uint64_t last_ = 0;
};

}  // namespace

void runInPieces(LaneWorker* helper, size_t pieces, int moves, const std::function<void(int, size_t)>& compute,
                 const std::function<void(int, size_t)>& move) {
  Posts posts(helper);
  // tickets[s][k]: the ticket of computation s on piece k.
  std::vector<std::vector<uint64_t>> tickets(size_t(moves) + 1, std::vector<uint64_t>(pieces));
  if (pieces > 0) tickets[0][0] = posts.post([&compute] { compute(0, 0); });
  // In round t, move s goes with piece t - s, so the wire carries piece k's moves while the helper computes
  // the next pieces' first steps and the last pieces' later ones.
  for (size_t t = 0; t + 1 < pieces + size_t(moves); ++t) {
    if (t + 1 < pieces) tickets[0][t + 1] = posts.post([&compute, t] { compute(0, t + 1); });
    for (int s = 0; s < moves; ++s) {
      if (t < size_t(s) || t - size_t(s) >= pieces) continue;
      const size_t k = t - size_t(s);
      posts.wait(tickets[size_t(s)][k]);
      move(s, k);
      tickets[size_t(s) + 1][k] = posts.post([&compute, s, k] { compute(s + 1, k); });
    }
  }
  posts.finish();
}

}  // namespace spmd
