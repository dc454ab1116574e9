#include "estimating/compressed_allreduce.h"

#include <string>
#include <type_traits>

#include "base/error.h"

namespace spmd {
namespace {

template <class T>
constexpr DType kComputeType = sizeof(T) == 8 ? DType::F64 : DType::F32;

template <class T>
class OneBitAllreduce final : public EstimatingOp {
 public:
  OneBitAllreduce(Memory& memory, int rank, int W, size_t n, DType dt, int resetEvery)
      : m_(memory), k_(memory.kernels()), rank_(rank), W_(W), n_(n), dt_(dt), resetEvery_(resetEvery),
        P_((n + 8 * size_t(W) - 1) / (8 * size_t(W)) * 8 * size_t(W)), L_(P_ / size_t(W)),
        recordBytes_(L_ / 8 + sizeof(T)),
        worker_(Buffer::zeros(memory, P_ * sizeof(T))), server_(Buffer::zeros(memory, L_ * sizeof(T))),
        wide_(memory, dt == kComputeType<T> ? 0 : n * sizeof(T)),
        send_(memory, size_t(W) * recordBytes_), received_(memory, size_t(W) * recordBytes_), mine_(memory, recordBytes_),
        gathered_(memory, size_t(W) * recordBytes_), scales_(memory, 2 * sizeof(T)),
        nonFinite_(Buffer::zeros(memory, sizeof(uint32_t))) {}

  void run(Collectives& c, const void* in, void* out) override {
    if (P_ == 0) return;
    if (resetEvery_ > 0 && step_ > 0 && step_ % resetEvery_ == 0) {
      worker_.zero();
      server_.zero();
    }
    ++step_;
    compressWorker(input(in));
    c.allToAll(send_.get(), received_.get(), size_t(W_), recordBytes_, Algo::Auto);
    compressServer();
    c.allGather(mine_.get(), gathered_.get(), recordBytes_, Algo::Auto);
    decompress(out);
  }

  // A NaN or infinity would spread through the error buffers and never leave; say so instead.
  void verify() const override {
    if (P_ == 0 || firstRaised(m_, nonFinite_, 1) < 0) return;
    throw CommError(code::kInvalid, "compressed_allreduce: rank " + std::to_string(rank_) +
                                        "'s input holds NaN or infinite values (or values whose squares overflow)");
  }

  size_t wireBytes() const override { return P_ == 0 ? 0 : 2 * size_t(W_ - 1) * recordBytes_; }

  std::vector<NamedBuffer> state() const override {
    return {fetch("worker_error", worker_), fetch("server_error", server_)};
  }

 private:
  // The input in the compute type: the tensor itself, or halves widened into scratch.
  const T* input(const void* in) {
    if constexpr (std::is_same_v<T, float>) {
      if (wide_.get()) {
        k_.toF32(dt_, in, wide_.as<T>(), n_);
        return wide_.as<T>();
      }
    }
    return static_cast<const T*>(in);
  }

  // Step 1 and the first half of step 2: x = pad(input) + worker_error, scale s_w = ||x|| / sqrt(P), chunk
  // j's signs into record j (with s_w after them), worker_error = x - s_w * sign(x).
  void compressWorker(const T* in) {
    T* x = worker_.as<T>();
    T* scale = scales_.as<T>();
    k_.addAndScale(x, in, n_, P_, scale, nonFinite_.as<uint32_t>());
    k_.packRecords(x, L_, W_, scale, send_.as<uint8_t>(), recordBytes_);
  }

  // Step 3: c = server_error + sum_j (s_j / W) * sign_j over the W chunks this rank received (added in rank
  // order), s_s = ||c|| / sqrt(P/W), this rank's record = sign(c) and s_s, server_error = c - s_s * sign(c).
  void compressServer() {
    T* scale = scales_.as<T>() + 1;
    k_.accumulateRecords({received_.as<uint8_t>(), recordBytes_, W_}, T(W_), server_.as<T>(), L_, scale);
    k_.packRecords(server_.as<T>(), L_, 1, scale, mine_.as<uint8_t>(), recordBytes_);
  }

  // Step 4: output chunk j = s_s(j) * sign_j, trimmed to the tensor's length.
  void decompress(void* out) {
    T* dst = wide_.get() ? wide_.as<T>() : static_cast<T*>(out);
    k_.unpackRecords({gathered_.as<uint8_t>(), recordBytes_, W_}, L_, n_, dst);
    if constexpr (std::is_same_v<T, float>) {
      if (wide_.get()) k_.fromF32(dt_, dst, out, n_);
    }
  }

  NamedBuffer fetch(const char* name, const Buffer& b) const {
    NamedBuffer out{name, kComputeType<T>, std::vector<uint8_t>(b.bytes())};
    m_.download(out.data.data(), b.get(), b.bytes());
    return out;
  }

  Memory& m_;
  kernels::DeviceKernels& k_;
  const int rank_, W_;
  const size_t n_;
  const DType dt_;
  const int resetEvery_;
  const size_t P_, L_, recordBytes_;
  int64_t step_ = 0;
  Buffer worker_, server_;
  Buffer wide_;  // halves only: the widened input, then the output before rounding
  Buffer send_, received_, mine_, gathered_;
  Buffer scales_;     // s_w, then s_s
  Buffer nonFinite_;  // set when s_w is not finite
};

}  // namespace

std::unique_ptr<EstimatingOp> makeCompressedAllreduce(Memory& memory, int rank, int worldSize, size_t count, DType dt,
                                                      int resetEvery) {
  if (!isFloat(dt)) {
    throw CommError(code::kInvalid,
                    "compressed_allreduce needs a floating-point tensor, got " + std::string(dtypeName(dt)));
  }
  if (dt == DType::F64) return std::make_unique<OneBitAllreduce<double>>(memory, rank, worldSize, count, dt, resetEvery);
  return std::make_unique<OneBitAllreduce<float>>(memory, rank, worldSize, count, dt, resetEvery);
}

}  // namespace spmd
