#include "backends/tcp/roll_call.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "runtime/backend.h"

namespace spmd::tcp {
namespace {

using Clock = std::chrono::steady_clock;

static_assert(kWireLanes >= size_t(kMaxLanes), "a roll call's answer carries every lane");

// Long enough for a connector thread on a loaded host to answer; short, since it delays the error of
// every rank that times out.
constexpr auto kLimit = std::chrono::milliseconds(1000);
// Questions in flight at once: each is a descriptor.
constexpr size_t kAtOnce = 32;
// After a connection closed unanswered (a peer's connector crowded by strangers closes its oldest unproven
// connection) or a dial that failed in passing.
constexpr auto kRetry = std::chrono::milliseconds(50);
constexpr size_t kAnswerBytes = kHelloBytes + kPositionsBytes;

// One peer's question, from dial to answer.
struct Question {
  Question(int p, std::string w) : peer(p), where(std::move(w)) {}
  int peer;
  std::string where;  // its address, for messages
  Fd fd;
  // Connecting; then reading the peer's challenge; then, our Hello sent, reading its answer.
  enum Stage { kConnecting, kChallenge, kAnswer } stage = kConnecting;
  Nonce nonce{};  // ours, which the answer must cover
  uint8_t buf[kAnswerBytes] = {};
  size_t got = 0;
  Clock::time_point retryAt{};
  std::string unanswered;  // what is said of the peer if time runs out before it answers
  bool over = false;
};

int millisUntil(Clock::time_point t) {
  return int(std::clamp<int64_t>(std::chrono::ceil<std::chrono::milliseconds>(t - Clock::now()).count(), 0, 1 << 30));
}

}  // namespace

// The questions of one roll call, asked on the caller's thread.
class RollCall::Asking {
 public:
  explicit Asking(const RollCall& call) : c_(call) {
    for (int r = 0; r < c_.size_; ++r) {
      if (c_.peers_[size_t(r)]) questions_.emplace_back(r, c_.peers_[size_t(r)]->toString());
    }
  }

  std::vector<Answer> run() {
    const Clock::time_point until = Clock::now() + kLimit;
    while (Clock::now() < until && answers_.size() < questions_.size()) {
      Clock::time_point wake = until;
      dialMore(wake);
      fds_.clear();
      polled_.clear();
      for (Question& q : questions_) {
        if (!q.fd) continue;
        fds_.push_back({q.fd.get(), short(q.stage == Question::kConnecting ? POLLOUT : POLLIN), 0});
        polled_.push_back(&q);
      }
      if (poll(fds_.data(), fds_.size(), millisUntil(wake)) < 0 && errno != EINTR) break;
      for (size_t i = 0; i < fds_.size(); ++i) {
        if (fds_[i].revents) progress(*polled_[i], fds_[i].revents);
      }
    }
    for (Question& q : questions_) {
      if (q.over) continue;
      if (q.stage != Question::kConnecting) q.unanswered = "did not answer the roll call within 1 s (stopped or wedged)";
      finish(q, q.unanswered.empty() ? "is unreachable (" + q.where + ": no connection within 1 s)" : q.unanswered);
    }
    return std::move(answers_);
  }

 private:
  // Dials the questions due, up to kAtOnce connections in all; `wake` comes forward to the next retry.
  void dialMore(Clock::time_point& wake) {
    size_t open = size_t(std::count_if(questions_.begin(), questions_.end(), [](const Question& q) { return bool(q.fd); }));
    for (Question& q : questions_) {
      if (q.over || q.fd) continue;
      if (q.retryAt > Clock::now() || open >= kAtOnce) {
        wake = std::min(wake, std::max(q.retryAt, Clock::now() + kRetry));
        continue;
      }
      int failed = 0;
      q.fd = startConnect(*c_.peers_[size_t(q.peer)], failed);
      if (failed) retryOrGone(q, failed);
      else ++open;
    }
  }

  void progress(Question& q, short revents) {
    if (q.stage == Question::kConnecting) return connected(q, revents);
    const size_t want = q.stage == Question::kChallenge ? kChallengeBytes : kAnswerBytes;
    ssize_t n = recv(q.fd.get(), q.buf + q.got, want - q.got, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) return retry(q, "did not answer the roll call (" + q.where + " closed the connection before answering)");
    q.got += size_t(n);
    if (q.got < want) return;
    q.got = 0;
    if (q.stage == Question::kChallenge) return ask(q);
    std::optional<Hello> h = decodeHello(q.buf);
    if (!h || !proves(c_.mac_, c_.key_, q.nonce, *h, true) || h->from != q.peer || h->to != c_.rank_ || h->lane != kRollCallLane) {
      return notOurs(q);
    }
    finish(q, "", decodePositions(q.buf + kHelloBytes));
  }

  void notOurs(Question& q) { finish(q, "answered as another process (" + q.where + " is not that rank of this job)"); }

  void connected(Question& q, short revents) {
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(q.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err) return retryOrGone(q, err);
    if (revents & POLLOUT) q.stage = Question::kChallenge;
  }

  // The peer's challenge is in: our Hello proves the key against it and carries our own nonce.
  void ask(Question& q) {
    std::optional<Hello> h = answerChallenge(c_.mac_, c_.key_, q.buf, Hello{c_.rank_, q.peer, c_.size_, kRollCallLane});
    if (!h) return notOurs(q);
    if (!sendHello(q.fd.get(), *h)) return retryOrGone(q, errno);
    q.nonce = h->nonce;
    q.stage = Question::kAnswer;
  }

  // Every rank listened before the ranks exchanged addresses, so a refusal means the peer has exited;
  // anything else (a lost SYN, a link that comes back) is tried again while time is left.
  void retryOrGone(Question& q, int err) {
    if (err == ECONNREFUSED) return finish(q, "is gone (" + q.where + " refused the roll call)", std::nullopt, true);
    retry(q, "is unreachable (" + q.where + ": " + std::strerror(err) + ")");
  }

  void retry(Question& q, const std::string& unanswered) {
    q.fd.reset();
    q.stage = Question::kConnecting;
    q.got = 0;
    q.unanswered = unanswered;
    q.retryAt = Clock::now() + kRetry;
  }

  void finish(Question& q, const std::string& unanswered, std::optional<Positions> where = std::nullopt, bool gone = false) {
    q.fd.reset();
    q.over = true;
    answers_.push_back(Answer{q.peer, where, unanswered, gone});
  }

  const RollCall& c_;
  std::vector<Question> questions_;
  std::vector<Answer> answers_;
  std::vector<pollfd> fds_;
  std::vector<Question*> polled_;
};

RollCall::RollCall(int rank, int size, Key key, MacFn mac, std::vector<std::optional<SocketAddress>> peers)
    : rank_(rank), size_(size), key_(key), mac_(mac), peers_(std::move(peers)) {}

std::vector<PeerSighting> RollCall::call(int lane) {
  std::lock_guard lock(mu_);
  if (!answers_) answers_ = Asking(*this).run();
  std::vector<PeerSighting> seen;
  for (const Answer& a : *answers_) {
    if (a.where) seen.push_back({a.rank, true, (*a.where)[size_t(lane)], 0, {}});
    else seen.push_back({a.rank, false, 0, -1, a.unanswered, a.gone});
  }
  return seen;
}

}  // namespace spmd::tcp
