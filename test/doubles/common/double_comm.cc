#include "common/double_comm.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

#include "core/error.h"

namespace spmd::doubles {
namespace {

using namespace std::chrono_literals;

bool envIs(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, value) == 0;
}

constexpr int kLanes = 1;
constexpr size_t kChannelBytes = 64 * 1024;

}  // namespace

std::string DoubleComm::newName() {
  std::random_device rd;
  return "/spmd-double-" + std::to_string(getpid()) + "-" + std::to_string(rd());
}

DoubleComm::DoubleComm(shm::Segment seg, int rank)
    : segment_(std::move(seg)),
      transport_(segment_, rank, 0),
      algorithms_(transport_, [this](const std::string& why) { transport_.abort(why); }) {}

std::unique_ptr<DoubleComm> DoubleComm::join(const std::string& name, int nranks, int rank) {
  if (envIs("SPMD_DOUBLE_FAIL_INIT", "1") || nranks < 1 || rank < 0 || rank >= nranks) return nullptr;
  const auto giveUp = std::chrono::steady_clock::now() + 30s;
  std::unique_ptr<DoubleComm> comm;
  // The others retry until rank 0's segment exists and is laid out (it may not be yet).
  while (!comm) {
    try {
      const shm::Layout layout{nranks, kLanes, kChannelBytes, 0, 0};  // the double moves data on channels only
      comm = std::make_unique<DoubleComm>(rank == 0 ? shm::Segment::create(name, layout) : shm::Segment::attach(name, layout),
                                          rank);
    } catch (const CommError&) {
      if (rank == 0 || std::chrono::steady_clock::now() >= giveUp) return nullptr;
      std::this_thread::sleep_for(5ms);
    }
  }
  auto& attached = comm->segment_.header().attached;
  attached.fetch_add(1);
  while (int(attached.load()) < nranks) {
    if (std::chrono::steady_clock::now() >= giveUp) return nullptr;
    std::this_thread::sleep_for(1ms);
  }
  if (rank == 0) comm->segment_.unlink();  // everyone is attached: no crash can leak the name now
  const char* stall = std::getenv("SPMD_DOUBLE_STALL_RANK");
  comm->asyncFault_ = envIs("SPMD_DOUBLE_ASYNC_ERROR", "1");
  comm->hang_ = comm->asyncFault_ || (stall && std::atoi(stall) == rank);
  return comm;
}

bool DoubleComm::enqueue(void* s, std::function<void()> op) {
  auto* stream = static_cast<Stream*>(s);
  if (aborted_ || !stream) return false;  // the doubles have no default stream
  stream->pending++;
  worker_.submit([this, stream, op = std::move(op)] {
    while (hang_ && !aborted_) std::this_thread::sleep_for(5ms);
    if (!aborted_) {
      try {
        op();
      } catch (const std::exception&) {
        failed_ = true;
      }
    }
    stream->pending--;
  });
  return true;
}

void DoubleComm::abort() {
  aborted_ = true;
  transport_.abort("communicator aborted");
}

}  // namespace spmd::doubles

SPMD_DOUBLE_EXPORT int spmdDoubleStreamCreate(void** stream) {
  *stream = new spmd::doubles::Stream;
  return 0;
}

SPMD_DOUBLE_EXPORT int spmdDoubleStreamQuery(void* stream) {
  return static_cast<spmd::doubles::Stream*>(stream)->pending.load() ? 1 : 0;
}

SPMD_DOUBLE_EXPORT int spmdDoubleStreamDestroy(void* stream) {
  delete static_cast<spmd::doubles::Stream*>(stream);
  return 0;
}
