// An op that estimates an exact collective by sending less than it would (compressed_allreduce,
// quantized_allreduce). Its state (error-feedback buffers) persists across steps; the executor measures
// its outputs against the exact result (estimating/estimate_error.h) instead of checking them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/collectives.h"
#include "kernels/memory.h"

namespace spmd {

// Named arrays of numbers an op reports beyond its timings.
using NamedSeries = std::vector<std::pair<std::string, std::vector<double>>>;

// A named array in the op's compute type, e.g. compressed_allreduce's error buffers.
struct NamedBuffer {
  std::string name;
  DType dtype = DType::F32;
  std::vector<uint8_t> data;
};

class EstimatingOp {
 public:
  virtual ~EstimatingOp() = default;
  // One step on the lane `c` the op was made for. Collective.
  virtual void run(Collectives& c, const void* in, void* out) = 0;
  // Throws CommError(kInvalid) when a step met values that are not finite (its kernels raise flags in the
  // op's memory). Called after each step's timing, so that no timed step waits on a device-to-host copy.
  virtual void verify() const = 0;
  // Bytes this rank sends per step.
  virtual size_t wireBytes() const = 0;
  // The state after the last step, in the compute type (e.g. "worker_error"); empty when it keeps none.
  virtual std::vector<NamedBuffer> state() const = 0;
};

// The first of the `count` flags in `flags` that a kernel raised, or -1.
inline int firstRaised(Memory& m, const Buffer& flags, int count) {
  std::vector<uint32_t> raised(size_t(count), 0);
  m.download(raised.data(), flags.get(), raised.size() * sizeof(uint32_t));
  for (int i = 0; i < count; ++i) if (raised[size_t(i)]) return i;
  return -1;
}

}  // namespace spmd
