#include "core/compressed_allreduce.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/onebit.h"

namespace spmd {
namespace {

template <class T>
constexpr DType kComputeType = sizeof(T) == 8 ? DType::F64 : DType::F32;

// ||v||_2 / sqrt(len) from the sum of squares, rounded once to the compute type.
template <class T>
T rmsScale(double squares, size_t len) {
  return T(std::sqrt(squares / double(len)));
}

template <class T>
class OneBitAllreduce final : public EstimatingOp {
 public:
  OneBitAllreduce(int rank, int W, size_t n, DType dt, int resetEvery)
      : rank_(rank), W_(W), n_(n), dt_(dt), resetEvery_(resetEvery),
        P_((n + 8 * size_t(W) - 1) / (8 * size_t(W)) * 8 * size_t(W)), L_(P_ / size_t(W)),
        chunkBytes_(L_ / 8), recordBytes_(chunkBytes_ + sizeof(T)),
        worker_(P_), server_(L_), wide_(dt == kComputeType<T> ? 0 : n),
        send_(size_t(W) * recordBytes_), received_(size_t(W) * recordBytes_), mine_(recordBytes_),
        gathered_(size_t(W) * recordBytes_), sources_(size_t(W)), weights_(size_t(W)) {}

  void run(Collectives& c, const void* in, void* out) override {
    if (P_ == 0) return;
    if (resetEvery_ > 0 && step_ > 0 && step_ % resetEvery_ == 0) {
      std::fill(worker_.begin(), worker_.end(), T(0));
      std::fill(server_.begin(), server_.end(), T(0));
    }
    ++step_;
    compressWorker(input(in));
    c.allToAll(send_.data(), received_.data(), size_t(W_), recordBytes_, Algo::Auto);
    compressServer();
    c.allGather(mine_.data(), gathered_.data(), recordBytes_, Algo::Auto);
    decompress(out);
  }

  size_t wireBytes() const override { return P_ == 0 ? 0 : 2 * size_t(W_ - 1) * recordBytes_; }

  std::vector<NamedBuffer> state() const override {
    return {buffer("worker_error", worker_), buffer("server_error", server_)};
  }

 private:
  // The input in the compute type: the tensor itself, or halves widened into scratch.
  const T* input(const void* in) {
    if constexpr (std::is_same_v<T, float>) {
      if (!wide_.empty()) {
        kernels::widenToF32(dt_, in, wide_.data(), n_);
        return wide_.data();
      }
    }
    return static_cast<const T*>(in);
  }

  // Step 1 and the first half of step 2: x = pad(input) + worker_error, scale s_w = ||x|| / sqrt(P), chunk
  // j's signs into record j (with s_w after them), worker_error = x - s_w * sign(x).
  void compressWorker(const T* in) {
    T* x = worker_.data();
    const double squares = kernels::addAndSumSquares(x, in, n_) + kernels::sumSquares(x + n_, P_ - n_);
    const T scale = rmsScale<T>(squares, P_);
    // A NaN or infinity would spread through the error buffers and never leave; say so instead.
    if (!std::isfinite(scale)) {
      throw CommError(code::kInvalid, "compressed_allreduce: rank " + std::to_string(rank_) +
                                          "'s input holds NaN or infinite values (or values whose squares overflow)");
    }
    for (int j = 0; j < W_; ++j) {
      uint8_t* record = send_.data() + size_t(j) * recordBytes_;
      kernels::packSignsKeepError(x + size_t(j) * L_, L_, scale, record);
      std::memcpy(record + chunkBytes_, &scale, sizeof(T));
    }
  }

  // Step 3: c = server_error + sum_j (s_j / W) * sign_j over the W chunks this rank received (added in rank
  // order), s_s = ||c|| / sqrt(P/W), this rank's record = sign(c) and s_s, server_error = c - s_s * sign(c).
  void compressServer() {
    for (int j = 0; j < W_; ++j) {
      const uint8_t* record = received_.data() + size_t(j) * recordBytes_;
      T scale;
      std::memcpy(&scale, record + chunkBytes_, sizeof(T));
      sources_[size_t(j)] = record;
      weights_[size_t(j)] = scale / T(W_);
    }
    T* acc = server_.data();
    const double squares = kernels::accumulateSigns(sources_.data(), weights_.data(), W_, acc, L_);
    const T scale = rmsScale<T>(squares, L_);
    kernels::packSignsKeepError(acc, L_, scale, mine_.data());
    std::memcpy(mine_.data() + chunkBytes_, &scale, sizeof(T));
  }

  // Step 4: output chunk j = s_s(j) * sign_j, trimmed to the tensor's length.
  void decompress(void* out) {
    T* dst = wide_.empty() ? static_cast<T*>(out) : wide_.data();
    for (int j = 0; j < W_ && size_t(j) * L_ < n_; ++j) {
      const uint8_t* record = gathered_.data() + size_t(j) * recordBytes_;
      T scale;
      std::memcpy(&scale, record + chunkBytes_, sizeof(T));
      const size_t start = size_t(j) * L_;
      kernels::unpackScaled(record, std::min(L_, n_ - start), scale, dst + start);
    }
    if constexpr (std::is_same_v<T, float>) {
      if (!wide_.empty()) kernels::narrowFromF32(dt_, wide_.data(), out, n_);
    }
  }

  static NamedBuffer buffer(const char* name, const std::vector<T>& v) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(v.data());
    return {name, kComputeType<T>, std::vector<uint8_t>(bytes, bytes + v.size() * sizeof(T))};
  }

  const int rank_, W_;
  const size_t n_;
  const DType dt_;
  const int resetEvery_;
  const size_t P_, L_, chunkBytes_, recordBytes_;
  int64_t step_ = 0;
  std::vector<T> worker_, server_;
  std::vector<T> wide_;  // halves only: the widened input, then the output before rounding
  std::vector<uint8_t> send_, received_, mine_, gathered_;
  std::vector<const uint8_t*> sources_;
  std::vector<T> weights_;
};

}  // namespace

std::unique_ptr<EstimatingOp> makeCompressedAllreduce(int rank, int worldSize, size_t count, DType dt, int resetEvery) {
  if (!isFloat(dt)) {
    throw CommError(code::kInvalid,
                    "compressed_allreduce needs a floating-point tensor, got " + std::string(dtypeName(dt)));
  }
  if (dt == DType::F64) return std::make_unique<OneBitAllreduce<double>>(rank, worldSize, count, dt, resetEvery);
  return std::make_unique<OneBitAllreduce<float>>(rank, worldSize, count, dt, resetEvery);
}

}  // namespace spmd
