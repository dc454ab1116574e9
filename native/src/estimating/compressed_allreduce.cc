#include "estimating/compressed_allreduce.h"

#include <algorithm>
#include <string>
#include <type_traits>

#include "base/error.h"
#include "base/lane_worker.h"
#include "estimating/pieces.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/onebit.h"

namespace spmd {
namespace {

template <class T>
constexpr DType kComputeType = sizeof(T) == 8 ? DType::F64 : DType::F32;

// The default, where the ranks span hosts: kPieces pieces of each rank's chunk where each holds at least
// kMinPieceValues, else one piece. Measured on 2 hosts over 1 Gbit/s (docs/PERFORMANCE.md): at 16 Mi float32
// (chunks of 8 Mi) 4 pieces of 2 Mi beat 8 of 1 Mi and 16 of 512 Ki a little, and one piece by a fifth; at 4 Mi
// every piece size tried was slower than one piece.
constexpr size_t kPieces = 4, kMinPieceValues = 1024 * 1024;

// Elements of each chunk of L per piece: the spec's, else the default where there is a link to overlap (host
// memory, ranks on several hosts), else the whole chunk (a device's kernels queue on the lane's stream
// already); rounded up to whole tiles of the CPU kernels, which carry the server's sum of squares from tile to
// tile, so that pieces give the scale one pass would.
size_t pieceLength(size_t L, size_t asked, bool overlap) {
  if (asked == 0) asked = overlap && L >= kPieces * kMinPieceValues ? (L + kPieces - 1) / kPieces : L;
  const size_t tile = kernels::kSignsTile;
  return std::min((asked + tile - 1) / tile * tile, L);
}

template <class T>
class OneBitAllreduce final : public EstimatingOp {
 public:
  OneBitAllreduce(Memory& memory, int rank, int W, size_t n, DType dt, const OneBitSpec& spec)
      : m_(memory), k_(memory.kernels()), rank_(rank), W_(W), n_(n), dt_(dt), resetEvery_(spec.resetEvery),
        P_((n + 8 * size_t(W) - 1) / (8 * size_t(W)) * 8 * size_t(W)), L_(P_ / size_t(W)),
        pieceLen_(memory.isHost() ? pieceLength(L_, spec.pieceValues, spec.acrossHosts) : L_),
        pieces_(L_ == 0 ? 1 : (L_ + pieceLen_ - 1) / pieceLen_), recordBytes_(L_ / 8 + pieces_ * sizeof(T)),
        worker_(Buffer::zeros(memory, P_ * sizeof(T))), server_(Buffer::zeros(memory, L_ * sizeof(T))),
        wide_(memory, dt == kComputeType<T> ? 0 : n * sizeof(T)),
        send_(memory, size_t(W) * recordBytes_), received_(memory, size_t(W) * recordBytes_), mine_(memory, recordBytes_),
        gathered_(memory, size_t(W) * recordBytes_), scales_(memory, 2 * sizeof(T)),
        nonFinite_(Buffer::zeros(memory, sizeof(uint32_t))),
        helper_(pieces_ > 1 ? std::make_unique<LaneWorker>() : nullptr) {}

  void run(Collectives& c, const void* in, void* out) override {
    if (P_ == 0) return;
    if (resetEvery_ > 0 && step_ > 0 && step_ % resetEvery_ == 0) {
      worker_.zero();
      server_.zero();
    }
    ++step_;
    // The worker's scale needs every value before any sign is packed, and the server's every received
    // record: so two pipelines, each packing, moving and then summing or unpacking piece by piece.
    k_.addAndScale(worker_.as<T>(), input(in), n_, P_, scales_.as<T>(), nonFinite_.as<uint32_t>());
    double squares = 0;
    runInPieces(helper_.get(), pieces_, 1, [&](int s, size_t k) { s == 0 ? packWorker(k) : accumulate(k, squares); },
                [&](int, size_t k) { c.allToAll(at(send_, W_, k), at(received_, W_, k), size_t(W_), bytes(k), Algo::Auto); });
    runInPieces(helper_.get(), pieces_, 1, [&](int s, size_t k) { s == 0 ? packServer(k) : unpack(k, out); },
                [&](int, size_t k) { c.allGather(at(mine_, 1, k), at(gathered_, W_, k), bytes(k), Algo::Auto); });
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
  // Piece k: elements begin(k) .. begin(k) + length(k) - 1 of every rank's chunk (whole bytes of signs). A
  // buffer of `records` records per piece holds its pieces one after the other, each as `records` records
  // (kernels/device_kernels.h) of that piece's elements, the scale after each.
  size_t begin(size_t k) const { return k * pieceLen_; }
  size_t length(size_t k) const { return std::min(pieceLen_, L_ - begin(k)); }
  size_t bytes(size_t k) const { return length(k) / 8 + sizeof(T); }
  uint8_t* at(const Buffer& b, int records, size_t k) const {
    return b.as<uint8_t>() + size_t(records) * (begin(k) / 8 + k * sizeof(T));
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

  // Steps 1 and the first half of 2, after addAndScale gave x = pad(input) + worker_error and s_w = ||x|| /
  // sqrt(P): the signs of piece k of chunk j into record j of the piece (s_w after them), worker_error = x -
  // s_w * sign(x).
  void packWorker(size_t k) {
    if (pieces_ == 1) return k_.packRecords(worker_.as<T>(), L_, W_, scales_.as<T>(), send_.as<uint8_t>(), recordBytes_);
    for (int j = 0; j < W_; ++j) {
      k_.packRecords(worker_.as<T>() + size_t(j) * L_ + begin(k), length(k), 1, scales_.as<T>(),
                     at(send_, W_, k) + size_t(j) * bytes(k), bytes(k));
    }
  }

  // Step 3, piece by piece: c = server_error + sum_j (s_j / W) * sign_j over the W records this rank
  // received (added in rank order); after the last piece, s_s = ||c|| / sqrt(P/W). A device sums in one
  // piece, where its kernels take the root; the host's carry the sum of squares through the pieces.
  void accumulate(size_t k, double& squares) {
    const kernels::Strided records{at(received_, W_, k), bytes(k), W_};
    T* server = server_.as<T>() + begin(k);
    T* scale = scales_.as<T>() + 1;
    if (pieces_ == 1) return k_.accumulateRecords(records, T(W_), server, L_, scale);
    squares = kernels::accumulateRecordsSquares(records, T(W_), server, length(k), squares);
    if (k + 1 == pieces_) kernels::rms(squares, L_, scale, nullptr);
  }

  // The rest of step 3: this rank's record of piece k = sign(c) and s_s, server_error = c - s_s * sign(c).
  void packServer(size_t k) {
    k_.packRecords(server_.as<T>() + begin(k), length(k), 1, scales_.as<T>() + 1, at(mine_, 1, k), bytes(k));
  }

  // Step 4: piece k of output chunk j = s_s(j) * sign_j, trimmed to the tensor's length; halves rounded.
  void unpack(size_t k, void* out) {
    if (pieces_ == 1) return unpackRecords({gathered_.as<uint8_t>(), recordBytes_, W_}, L_, 0, n_, out);
    for (int j = 0; j < W_ && size_t(j) * L_ + begin(k) < n_; ++j) {
      const size_t first = size_t(j) * L_ + begin(k);
      unpackRecords({at(gathered_, W_, k) + size_t(j) * bytes(k), bytes(k), 1}, length(k), first, std::min(length(k), n_ - first), out);
    }
  }

  // Output elements first .. first + len - 1 from records of `chunk` elements each.
  void unpackRecords(const kernels::Strided& records, size_t chunk, size_t first, size_t len, void* out) {
    T* dst = (wide_.get() ? wide_.as<T>() : static_cast<T*>(out)) + first;
    k_.unpackRecords(records, chunk, len, dst);
    if constexpr (std::is_same_v<T, float>) {
      if (wide_.get()) k_.fromF32(dt_, dst, static_cast<uint8_t*>(out) + first * elementSize(dt_), len);
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
  const size_t P_, L_;
  const size_t pieceLen_, pieces_;  // elements of each chunk per piece, and pieces per phase
  const size_t recordBytes_;        // one rank's chunk in records, its pieces' together
  int64_t step_ = 0;
  Buffer worker_, server_;
  Buffer wide_;  // halves only: the widened input, then the output before rounding
  Buffer send_, received_, mine_, gathered_;
  Buffer scales_;     // s_w, then s_s
  Buffer nonFinite_;  // set when s_w is not finite
  std::unique_ptr<LaneWorker> helper_;  // the host's computations, where a phase has several pieces; last: joined first
};

}  // namespace

std::unique_ptr<EstimatingOp> makeCompressedAllreduce(Memory& memory, int rank, int worldSize, size_t count, DType dt,
                                                      const OneBitSpec& spec) {
  if (!isFloat(dt)) {
    throw CommError(code::kInvalid,
                    "compressed_allreduce needs a floating-point tensor, got " + std::string(dtypeName(dt)));
  }
  if (dt == DType::F64) return std::make_unique<OneBitAllreduce<double>>(memory, rank, worldSize, count, dt, spec);
  return std::make_unique<OneBitAllreduce<float>>(memory, rank, worldSize, count, dt, spec);
}

}  // namespace spmd
