#include "thread_transport_double.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <thread>

#include "base/error.h"

namespace spmd::testing {

ThreadFabricDouble::ThreadFabricDouble(int size, size_t channelCapacity, std::chrono::milliseconds stallLimit)
    : size_(size), stallLimit_(stallLimit), wake_(size_t(size)), channels_(size_t(size) * size_t(size)) {
  for (Channel& c : channels_) c.ring.resize(channelCapacity);
}

void ThreadFabricDouble::abort() {
  std::lock_guard lock(mutex_);
  aborted_ = true;
  for (auto& w : wake_) w.notify_all();
}

std::string ThreadFabricDouble::leftovers() const {
  std::lock_guard lock(mutex_);
  for (int from = 0; from < size_; ++from) {
    for (int to = 0; to < size_; ++to) {
      size_t used = channels_[size_t(from) * size_t(size_) + size_t(to)].used;
      if (used) {
        return std::to_string(used) + " bytes left in channel " + std::to_string(from) + "->" + std::to_string(to);
      }
    }
  }
  return "";
}

namespace {

// One message's progress. FIFO per pair means only the first unfinished message to (or from) a peer may
// move; later ones to the same peer wait their turn.
struct Pending {
  int peer;
  unsigned char* recvData;
  const unsigned char* sendData;
  size_t bytes;
  size_t done = 0;
  bool finished() const { return done == bytes; }
};

bool blockedByEarlier(const std::vector<Pending>& list, size_t i) {
  for (size_t j = 0; j < i; ++j) {
    if (list[j].peer == list[i].peer && !list[j].finished()) return true;
  }
  return false;
}

}  // namespace

void ThreadTransportDouble::exchange(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs) {
  ThreadFabricDouble& f = fabric_;
  auto checkPeer = [&](int peer) {
    if (peer < 0 || peer >= f.size_ || peer == rank_) {
      throw CommError(code::kInvalid, "rank " + std::to_string(rank_) + ": bad peer " + std::to_string(peer));
    }
  };
  std::vector<Pending> out, in;
  for (const SendSpec& s : sends) {
    checkPeer(s.peer);
    out.push_back({s.peer, nullptr, static_cast<const unsigned char*>(s.data), s.bytes});
  }
  for (const RecvSpec& r : recvs) {
    checkPeer(r.peer);
    in.push_back({r.peer, static_cast<unsigned char*>(r.data), nullptr, r.bytes});
  }

  std::unique_lock lock(f.mutex_);
  auto deadline = std::chrono::steady_clock::now() + f.stallLimit_;
  for (;;) {
    if (f.aborted_) {
      throw CommError(code::kAborted, "rank " + std::to_string(rank_) + ": aborted because another rank failed");
    }
    bool moved = false;
    for (size_t i = 0; i < out.size(); ++i) {
      Pending& m = out[i];
      if (m.finished() || blockedByEarlier(out, i)) continue;
      auto& c = f.channel(rank_, m.peer);
      const size_t cap = c.ring.size(), before = m.done;
      while (!m.finished() && c.used < cap) {
        const size_t tail = (c.head + c.used) % cap;
        const size_t n = std::min({m.bytes - m.done, cap - c.used, cap - tail});
        std::memcpy(c.ring.data() + tail, m.sendData + m.done, n);
        c.used += n;
        m.done += n;
      }
      if (m.done != before) {
        moved = true;
        f.wake_[size_t(m.peer)].notify_one();
      }
    }
    for (size_t i = 0; i < in.size(); ++i) {
      Pending& m = in[i];
      if (m.finished() || blockedByEarlier(in, i)) continue;
      auto& c = f.channel(m.peer, rank_);
      const size_t cap = c.ring.size(), before = m.done;
      while (!m.finished() && c.used > 0) {
        const size_t n = std::min({m.bytes - m.done, c.used, cap - c.head});
        std::memcpy(m.recvData + m.done, c.ring.data() + c.head, n);
        c.head = (c.head + n) % cap;
        c.used -= n;
        m.done += n;
      }
      if (m.done != before) {
        moved = true;
        f.wake_[size_t(m.peer)].notify_one();
      }
    }
    auto unfinished = [](const std::vector<Pending>& l) {
      return std::find_if(l.begin(), l.end(), [](const Pending& m) { return !m.finished(); });
    };
    auto waitingSend = unfinished(out);
    auto waitingRecv = unfinished(in);
    if (waitingSend == out.end() && waitingRecv == in.end()) return;
    if (moved) {
      deadline = std::chrono::steady_clock::now() + f.stallLimit_;
      continue;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      const bool isRecv = waitingRecv != in.end();
      const Pending& m = isRecv ? *waitingRecv : *waitingSend;
      throw CommError(code::kTimeout, "rank " + std::to_string(rank_) + " waiting for rank " +
                                          std::to_string(m.peer) + (isRecv ? " to send" : " to receive") + " (" +
                                          std::to_string(m.done) + " of " + std::to_string(m.bytes) +
                                          " bytes moved)");
    }
    f.wake_[size_t(rank_)].wait_until(lock, deadline);
  }
}

std::vector<std::string> runRanksOnThreads(int size, size_t channelCapacity,
                                           const std::function<void(Transport&)>& body,
                                           std::chrono::milliseconds stallLimit) {
  ThreadFabricDouble fabric(size, channelCapacity, stallLimit);
  std::vector<std::string> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      ThreadTransportDouble transport(fabric, r);
      try {
        body(transport);
      } catch (const CommError& e) {
        errors[size_t(r)] = std::string(e.code()) + ": " + e.what();
        fabric.abort();
      } catch (const std::exception& e) {
        errors[size_t(r)] = std::string("rank ") + std::to_string(r) + ": " + e.what();
        fabric.abort();
      }
    });
  }
  for (auto& th : threads) th.join();
  std::vector<std::string> failures;
  for (auto& e : errors) {
    if (!e.empty()) failures.push_back(e);
  }
  if (failures.empty()) {
    if (std::string left = fabric.leftovers(); !left.empty()) failures.push_back(left);
  }
  return failures;
}

}  // namespace spmd::testing
