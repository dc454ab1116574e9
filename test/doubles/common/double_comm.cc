#include "common/double_comm.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>

#include "base/error.h"

namespace spmd::doubles {
namespace {

using namespace std::chrono_literals;

bool envIs(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, value) == 0;
}

// The rank a stall fault (SPMD_DOUBLE_STALL_*_RANK) names is `rank`.
bool stallsAt(const char* name, int rank) {
  const char* v = std::getenv(name);
  return v && std::atoi(v) == rank;
}

// How long a stalled call stays, as when the library waits on a peer that is not there.
constexpr auto kStall = 30s;

constexpr int kLanes = 1;
constexpr size_t kChannelBytes = 64 * 1024;

// The segment rank 0 made and has not unlinked yet: the peers have not all attached. Unlinked at exit, so
// a run that ends while a rank never arrives (an init deadline, a stalled peer) leaves no name in /dev/shm.
std::mutex pendingMutex;
std::string pending;

void unlinkPending() {
  std::lock_guard<std::mutex> lock(pendingMutex);
  if (!pending.empty()) ::shm_unlink(pending.c_str());
  pending.clear();
}

void setPending(const std::string& name) {
  static const bool registered = std::atexit(unlinkPending) == 0;
  (void)registered;
  std::lock_guard<std::mutex> lock(pendingMutex);
  pending = name;
}

std::vector<int> identity(int n) {
  std::vector<int> v(size_t(n), 0);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

}  // namespace

std::string DoubleComm::newName() {
  std::random_device rd;
  return "/spmd-double-" + std::to_string(getpid()) + "-" + std::to_string(rd());
}

DoubleComm::DoubleComm(std::shared_ptr<Shared> shared, std::unique_ptr<GroupTransport> group, std::vector<int> rootRanks)
    : shared_(std::move(shared)),
      group_(std::move(group)),
      transport_(group_ ? static_cast<Transport*>(group_.get()) : &shared_->transport),
      rootRanks_(std::move(rootRanks)),
      algorithms_(*transport_, [s = shared_.get()](const std::string& why) { s->transport.abort(why); }) {}

std::unique_ptr<DoubleComm> DoubleComm::join(const std::string& name, int nranks, int rank) {
  if (envIs("SPMD_DOUBLE_FAIL_INIT", "1") || nranks < 1 || rank < 0 || rank >= nranks) return nullptr;
  const auto giveUp = std::chrono::steady_clock::now() + kStall;
  if (stallsAt("SPMD_DOUBLE_STALL_INIT_RANK", rank)) {
    std::this_thread::sleep_until(giveUp);
    return nullptr;
  }
  std::shared_ptr<Shared> shared;
  // The others retry until rank 0's segment exists and is laid out (it may not be yet).
  while (!shared) {
    try {
      const shm::Layout layout{nranks, kLanes, kChannelBytes, 0, 0};  // the double moves data on channels only
      shared = std::make_shared<Shared>(rank == 0 ? shm::Segment::create(name, layout) : shm::Segment::attach(name, layout), rank);
    } catch (const CommError&) {
      if (rank == 0 || std::chrono::steady_clock::now() >= giveUp) return nullptr;
      std::this_thread::sleep_for(5ms);
    }
  }
  if (rank == 0) setPending(name);
  auto& attached = shared->segment.header().attached;
  attached.fetch_add(1);
  while (int(attached.load()) < nranks) {
    if (std::chrono::steady_clock::now() >= giveUp) {
      if (rank == 0) unlinkPending();
      return nullptr;
    }
    std::this_thread::sleep_for(1ms);
  }
  if (rank == 0) {
    shared->segment.unlink();  // everyone is attached: no crash can leak the name now
    setPending("");
  }
  const char* stall = std::getenv("SPMD_DOUBLE_STALL_RANK");
  shared->asyncFault = envIs("SPMD_DOUBLE_ASYNC_ERROR", "1");
  shared->hang = shared->asyncFault || (stall && std::atoi(stall) == rank);
  return std::unique_ptr<DoubleComm>(new DoubleComm(std::move(shared), nullptr, identity(nranks)));
}

std::unique_ptr<DoubleComm> DoubleComm::split(int color, int key) {
  if (stallsAt("SPMD_DOUBLE_STALL_SPLIT_RANK", rootRanks_[size_t(rank())])) {
    std::this_thread::sleep_for(kStall);
    throw CommError(code::kTimeout, "double: a stalled split");
  }
  const int W = size();
  const int mine[2] = {color, key};
  std::vector<int> all(2 * size_t(W));
  // On the worker, after the ops queued before: they use the same transport.
  std::promise<void> gathered;
  shared_->worker.submit([&] {
    try {
      algorithms_.allGather(mine, all.data(), sizeof mine, Algo::Auto);
      gathered.set_value();
    } catch (...) {
      gathered.set_exception(std::current_exception());
    }
  });
  gathered.get_future().get();
  if (color < 0) return nullptr;
  std::vector<int> members;
  for (int j = 0; j < W; ++j) {
    if (all[2 * size_t(j)] == color) members.push_back(j);
  }
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return all[2 * size_t(a) + 1] < all[2 * size_t(b) + 1]; });
  std::vector<int> rootRanks;
  for (int m : members) rootRanks.push_back(rootRanks_[size_t(m)]);
  auto group = std::make_unique<GroupTransport>(shared_->transport, rootRanks);
  return std::unique_ptr<DoubleComm>(new DoubleComm(shared_, std::move(group), std::move(rootRanks)));
}

bool DoubleComm::enqueue(void* s, std::function<void()> op) {
  auto* stream = static_cast<Stream*>(s);
  if (shared_->aborted || !stream) return false;  // the doubles have no default stream
  stream->issued++;
  Shared* shared = shared_.get();
  shared->worker.submit([shared, stream, op = std::move(op)] {
    while (shared->hang && !shared->aborted) std::this_thread::sleep_for(5ms);
    if (!shared->aborted) {
      try {
        op();
      } catch (const std::exception&) {
        shared->failed = true;
      }
    }
    stream->done++;
  });
  return true;
}

void DoubleComm::abort() {
  shared_->aborted = true;
  shared_->transport.abort("communicator aborted");
}

}  // namespace spmd::doubles
