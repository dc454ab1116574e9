#include "estimating/compressed_allreduce.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

#include "base/error.h"
#include "base/lane_worker.h"
#include "kernels/cpu/onebit.h"

namespace spmd {
namespace {

template <class T>
constexpr DType kComputeType = sizeof(T) == 8 ? DType::F64 : DType::F32;

// Pieces are whole tiles of the server's accumulation (kernels/cpu/onebit.cc), so that it adds its sums
// of squares in one pass's order whatever the pieces.
constexpr size_t kPieceAlign = 2048;
// 256 Ki elements: 32 KiB of signs per message, so a step of 16 Mi elements on two ranks moves 64 pieces
// in each phase, and the first piece's work, which nothing overlaps, is 1/64 of the pass.
constexpr size_t kDefaultPiece = 256 * 1024;

// What both forms share: the shape of the records, the conversions of halves, the reset schedule and the
// non-finite flag.
template <class T>
class OneBitBase : public EstimatingOp {
 public:
  OneBitBase(Memory& memory, int rank, int W, size_t n, DType dt, int resetEvery)
      : m_(memory), k_(memory.kernels()), rank_(rank), W_(W), n_(n), dt_(dt), resetEvery_(resetEvery),
        P_((n + 8 * size_t(W) - 1) / (8 * size_t(W)) * 8 * size_t(W)), L_(P_ / size_t(W)),
        recordBytes_(L_ / 8 + sizeof(T)), wide_(memory, dt == kComputeType<T> ? 0 : n * sizeof(T)),
        nonFinite_(Buffer::zeros(memory, sizeof(uint32_t))) {}

  // A NaN or infinity would spread through the error buffers and never leave; say so instead.
  void verify() const override {
    if (P_ == 0 || firstRaised(m_, nonFinite_, 1) < 0) return;
    throw CommError(code::kInvalid, "compressed_allreduce: rank " + std::to_string(rank_) +
                                        "'s input holds NaN or infinite values (or values whose squares overflow)");
  }

  size_t wireBytes() const override { return P_ == 0 ? 0 : 2 * size_t(W_ - 1) * recordBytes_; }

 protected:
  // Counts the step; true when its errors start from zero (resetEvery).
  bool startStep() {
    const bool reset = resetEvery_ > 0 && step_ > 0 && step_ % resetEvery_ == 0;
    ++step_;
    return reset;
  }

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
  // Where the output goes in the compute type, and the output rounded from there (halves).
  T* outputIn(void* out) const { return wide_.get() ? wide_.as<T>() : static_cast<T*>(out); }
  void output(void* out) {
    if constexpr (std::is_same_v<T, float>) {
      if (wide_.get()) k_.fromF32(dt_, wide_.as<T>(), out, n_);
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
  Buffer wide_;       // halves only: the widened input, then the output before rounding
  Buffer nonFinite_;  // set when s_w is not finite
};

// On a device: the steps as the design gives them, each kernel on the lane's stream.
template <class T>
class OneBitAllreduce final : public OneBitBase<T> {
  using B = OneBitBase<T>;
  using B::k_, B::W_, B::n_, B::P_, B::L_, B::recordBytes_;

 public:
  OneBitAllreduce(Memory& memory, int rank, int W, size_t n, DType dt, int resetEvery)
      : B(memory, rank, W, n, dt, resetEvery),
        worker_(Buffer::zeros(memory, P_ * sizeof(T))), server_(Buffer::zeros(memory, L_ * sizeof(T))),
        send_(memory, size_t(W) * recordBytes_), received_(memory, size_t(W) * recordBytes_), mine_(memory, recordBytes_),
        gathered_(memory, size_t(W) * recordBytes_), scales_(memory, 2 * sizeof(T)) {}

  void run(Collectives& c, const void* in, void* out) override {
    if (P_ == 0) return;
    if (B::startStep()) {
      worker_.zero();
      server_.zero();
    }
    compressWorker(B::input(in));
    c.allToAll(send_.get(), received_.get(), size_t(W_), recordBytes_, Algo::Auto);
    compressServer();
    c.allGather(mine_.get(), gathered_.get(), recordBytes_, Algo::Auto);
    k_.unpackRecords({gathered_.as<uint8_t>(), recordBytes_, W_}, L_, n_, B::outputIn(out));
    B::output(out);
  }

  std::vector<NamedBuffer> state() const override {
    return {B::fetch("worker_error", worker_), B::fetch("server_error", server_)};
  }

 private:
  // Step 1 and the first half of step 2: x = pad(input) + worker_error, scale s_w = ||x|| / sqrt(P), chunk
  // j's signs into record j (with s_w after them), worker_error = x - s_w * sign(x).
  void compressWorker(const T* in) {
    T* x = worker_.as<T>();
    T* scale = scales_.as<T>();
    k_.addAndScale(x, in, n_, P_, scale, B::nonFinite_.template as<uint32_t>());
    k_.packRecords(x, L_, W_, scale, send_.as<uint8_t>(), recordBytes_);
  }

  // Step 3: c = server_error + sum_j (s_j / W) * sign_j over the W chunks this rank received (added in rank
  // order), s_s = ||c|| / sqrt(P/W), this rank's record = sign(c) and s_s, server_error = c - s_s * sign(c).
  void compressServer() {
    T* scale = scales_.as<T>() + 1;
    k_.accumulateRecords({received_.as<uint8_t>(), recordBytes_, W_}, T(W_), server_.as<T>(), L_, scale);
    k_.packRecords(server_.as<T>(), L_, 1, scale, mine_.as<uint8_t>(), recordBytes_);
  }

  Buffer worker_, server_;
  Buffer send_, received_, mine_, gathered_;
  Buffer scales_;  // s_w, then s_s
};

// On the host: the same numbers, in pieces, overlapped. A helper thread works through the pieces in order
// while this thread (the lane's: MPI calls stay on it) moves each finished piece, so packing piece k+1, the
// wire for piece k and the work on what came in all run at once. The errors are carried (onebit.h): the
// buffers hold the values last packed and their scale, and the next step takes the error as it reads them.
//
// Phase 1 goes through x in index order, because s_w sums its squares in that order: the pieces of chunk j
// are gathered to rank j as they come, and the W scales all-gathered after the last. Phase 2 goes through
// this rank's chunk, each piece all-gathered, then the scales. Where a chunk is one piece (short tensors,
// or the stage's pipelineChunk), the phases move whole records, scale inside, as the device form does.
template <class T>
class PipelinedOneBit final : public OneBitBase<T> {
  using B = OneBitBase<T>;
  using B::W_, B::n_, B::P_, B::L_, B::recordBytes_, B::rank_;

 public:
  PipelinedOneBit(Memory& memory, int rank, int W, size_t n, DType dt, int resetEvery, size_t piece)
      : B(memory, rank, W, n, dt, resetEvery), piece_(std::min(piece, L_)),
        pieces_(L_ == 0 ? 0 : (L_ + piece_ - 1) / piece_), x_(P_, T(0)), c_(L_, T(0)),
        send_(size_t(W) * recordBytes_), received_(send_.size()), mine_(recordBytes_), gathered_(send_.size()),
        workerScales_(size_t(W)), serverScales_(size_t(W)) {}

  void run(Collectives& c, const void* in, void* out) override {
    if (P_ == 0) return;
    if (B::startStep()) {
      std::fill(x_.begin(), x_.end(), T(0));
      std::fill(c_.begin(), c_.end(), T(0));
      xScale_ = cScale_ = T(0);
    }
    // Whatever throws, the helper is done with the buffers before this returns.
    struct Drain {
      PipelinedOneBit& op;
      ~Drain() { op.drain(); }
    } drain{*this};
    compressWorker(c, B::input(in));
    compressServer(c);
    decompress(out);
  }

  std::vector<NamedBuffer> state() const override {
    return {error("worker_error", x_, xScale_), error("server_error", c_, cScale_)};
  }

 private:
  bool whole() const { return pieces_ == 1; }
  size_t pieceBegin(size_t k) const { return k * piece_; }
  size_t pieceEnd(size_t k) const { return std::min(L_, (k + 1) * piece_); }
  // Piece k of the W copies of a chunk that a gather or all-gather delivers: whole records in the whole
  // form, else piece by piece, the W copies of each side by side.
  kernels::Strided copies(const std::vector<uint8_t>& in, size_t k) const {
    if (whole()) return {in.data(), recordBytes_, W_};
    return {in.data() + size_t(W_) * pieceBegin(k) / 8, (pieceEnd(k) - pieceBegin(k)) / 8, W_};
  }
  static T scaleOf(double squares, size_t len) { return T(std::sqrt(squares / double(len))); }

  // Steps 1 and 2: x = carried worker error + pad(input), its signs to their chunks' ranks; then s_w.
  void compressWorker(Collectives& c, const T* y) {
    startBatch();
    auto squares = std::make_shared<kernels::CarriedSquares>();
    for (int j = 0; j < W_; ++j) {
      for (size_t k = 0; k < pieces_; ++k) {
        const size_t from = size_t(j) * L_ + pieceBegin(k), to = size_t(j) * L_ + pieceEnd(k);
        uint8_t* signs = send_.data() + size_t(j) * recordBytes_ + pieceBegin(k) / 8;
        post([=, this] { kernels::carryAddPack(x_.data(), y, from, to, n_, P_, xScale_, signs, *squares); });
      }
    }
    post([=, this] {
      xScale_ = scaleOf(squares->total(), P_);
      if (!std::isfinite(xScale_)) *B::nonFinite_.template as<uint32_t>() = 1;
      for (int j = 0; j < W_; ++j) std::memcpy(send_.data() + size_t(j) * recordBytes_ + L_ / 8, &xScale_, sizeof(T));
    });
    if (whole()) {
      wait();
      c.allToAll(send_.data(), received_.data(), size_t(W_), recordBytes_, Algo::Auto);
      for (int j = 0; j < W_; ++j) std::memcpy(&workerScales_[size_t(j)], received_.data() + size_t(j) * recordBytes_ + L_ / 8, sizeof(T));
      return;
    }
    for (int j = 0; j < W_; ++j) {
      for (size_t k = 0; k < pieces_; ++k) {
        wait(size_t(j) * pieces_ + k + 1);
        const size_t bytes = (pieceEnd(k) - pieceBegin(k)) / 8;
        uint8_t* into = j == rank_ ? received_.data() + size_t(W_) * pieceBegin(k) / 8 : nullptr;
        c.gather(send_.data() + size_t(j) * recordBytes_ + pieceBegin(k) / 8, into, bytes, j, Algo::Auto);
      }
    }
    wait();
    c.allGather(&xScale_, workerScales_.data(), sizeof(T), Algo::Auto);
  }

  // Step 3: c = carried server error + sum_j (s_j / W) sign_j (rank order), its signs to every rank; then s_s.
  void compressServer(Collectives& c) {
    std::vector<T> weights(static_cast<size_t>(W_));
    for (int j = 0; j < W_; ++j) weights[size_t(j)] = workerScales_[size_t(j)] / T(W_);
    startBatch();
    auto squares = std::make_shared<double>(0);
    for (size_t k = 0; k < pieces_; ++k) {
      post([=, this] {
        const kernels::Strided from = copies(received_, k);
        std::vector<const uint8_t*> sources(static_cast<size_t>(W_));
        for (int j = 0; j < W_; ++j) sources[size_t(j)] = from.at(j);
        kernels::carryAccumulatePack(c_.data(), pieceBegin(k), pieceEnd(k), cScale_, sources.data(), weights.data(), W_,
                                     mine_.data() + pieceBegin(k) / 8, *squares);
      });
    }
    post([=, this] {
      cScale_ = scaleOf(*squares, L_);
      std::memcpy(mine_.data() + L_ / 8, &cScale_, sizeof(T));
    });
    if (whole()) {
      wait();
      c.allGather(mine_.data(), gathered_.data(), recordBytes_, Algo::Auto);
      for (int j = 0; j < W_; ++j) std::memcpy(&serverScales_[size_t(j)], gathered_.data() + size_t(j) * recordBytes_ + L_ / 8, sizeof(T));
      return;
    }
    for (size_t k = 0; k < pieces_; ++k) {
      wait(k + 1);
      const size_t bytes = (pieceEnd(k) - pieceBegin(k)) / 8;
      c.allGather(mine_.data() + pieceBegin(k) / 8, gathered_.data() + size_t(W_) * pieceBegin(k) / 8, bytes, Algo::Auto);
    }
    wait();
    c.allGather(&cScale_, serverScales_.data(), sizeof(T), Algo::Auto);
  }

  // Step 4: output chunk j = s_s(j) * sign_j, trimmed to the tensor's length.
  void decompress(void* out) {
    T* dst = B::outputIn(out);
    for (int j = 0; j < W_; ++j) {
      for (size_t k = 0; k < pieces_; ++k) {
        const size_t from = size_t(j) * L_ + pieceBegin(k);
        if (from >= n_) break;
        kernels::unpackScaled(copies(gathered_, k).at(j), std::min(pieceEnd(k) - pieceBegin(k), n_ - from),
                              serverScales_[size_t(j)], dst + from);
      }
    }
    B::output(out);
  }

  NamedBuffer error(const char* name, const std::vector<T>& carried, T scale) const {
    NamedBuffer out{name, kComputeType<T>, std::vector<uint8_t>(carried.size() * sizeof(T))};
    kernels::carriedError(carried.data(), carried.size(), scale, reinterpret_cast<T*>(out.data.data()));
    return out;
  }

  // The helper's tasks, in batches (a phase's): wait(t) returns once the batch's first t are done.
  void startBatch() { batch_ = last_; }
  void post(std::function<void()> task) { last_ = helper_.post(std::move(task)); }
  void wait(size_t done) { helper_.wait(batch_ + done); }
  void wait() { helper_.wait(last_); }
  void drain() {
    try {
      wait();
    } catch (...) {  // the step's own error is the one to report
    }
  }

  const size_t piece_, pieces_;
  std::vector<T> x_, c_;     // the values last packed (the worker's, P; the server's, L) ...
  T xScale_ = 0, cScale_ = 0;  // ... and their scales: the errors are x - s·sign(x)
  std::vector<uint8_t> send_, received_, mine_, gathered_;
  std::vector<T> workerScales_, serverScales_;  // every rank's s_w and s_s
  uint64_t batch_ = 0, last_ = 0;  // the tickets before the batch's first task, and the last task's
  LaneWorker helper_;   // last: joined first, while the buffers its tasks use still exist
};

}  // namespace

std::unique_ptr<EstimatingOp> makeCompressedAllreduce(Memory& memory, int rank, int worldSize, size_t count, DType dt,
                                                      int resetEvery, size_t pipelineChunk) {
  if (!isFloat(dt)) {
    throw CommError(code::kInvalid,
                    "compressed_allreduce needs a floating-point tensor, got " + std::string(dtypeName(dt)));
  }
  const size_t piece = std::max<size_t>(1, ((pipelineChunk ? pipelineChunk : kDefaultPiece) + kPieceAlign - 1) / kPieceAlign) * kPieceAlign;
  auto make = [&]<class T>() -> std::unique_ptr<EstimatingOp> {
    if (memory.isHost()) return std::make_unique<PipelinedOneBit<T>>(memory, rank, worldSize, count, dt, resetEvery, piece);
    return std::make_unique<OneBitAllreduce<T>>(memory, rank, worldSize, count, dt, resetEvery);
  };
  return dt == DType::F64 ? make.template operator()<double>() : make.template operator()<float>();
}

}  // namespace spmd
