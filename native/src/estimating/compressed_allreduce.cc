#include "estimating/compressed_allreduce.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

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
        pieces_(L_ == 0 ? 1 : (L_ + pieceLen_ - 1) / pieceLen_), recordBytes_(L_ / 8 + sizeof(T)),
        worker_(Buffer::zeros(memory, P_ * sizeof(T))), server_(Buffer::zeros(memory, L_ * sizeof(T))),
        wide_(memory, dt == kComputeType<T> ? 0 : n * sizeof(T)),
        send_(memory, size_t(W) * recordBytes_), received_(memory, size_t(W) * recordBytes_), mine_(memory, recordBytes_),
        gathered_(memory, size_t(W) * recordBytes_), scales_(Buffer::zeros(memory, 2 * sizeof(T))),
        nonFinite_(Buffer::zeros(memory, sizeof(uint32_t))),
        sources_(memory.isHost() ? size_t(W) : 0), weights_(memory.isHost() ? size_t(W) : 0),
        helper_(pieces_ > 1 ? std::make_unique<LaneWorker>() : nullptr) {}

  void run(Collectives& c, const void* in, void* out) override {
    if (P_ == 0) return;
    if (resetEvery_ > 0 && step_ > 0 && step_ % resetEvery_ == 0) {
      worker_.zero();
      server_.zero();
      scales_.zero();
    }
    ++step_;
    m_.isHost() ? runOnHost(c, in, out) : runOnDevice(c, in, out);
  }

  // A NaN or infinity would spread through the error buffers and never leave; say so instead.
  void verify() const override {
    if (P_ == 0 || firstRaised(m_, nonFinite_, 1) < 0) return;
    throw CommError(code::kInvalid, "compressed_allreduce: rank " + std::to_string(rank_) +
                                        "'s input holds NaN or infinite values (or values whose squares overflow)");
  }

  size_t wireBytes() const override { return P_ == 0 ? 0 : 2 * size_t(W_ - 1) * recordBytes_; }

  std::vector<NamedBuffer> state() const override {
    return {fetch("worker_error", worker_, 0), fetch("server_error", server_, 1)};
  }

 private:
  // Piece k: elements begin(k) .. begin(k) + length(k) - 1 of every rank's chunk, block(k) bytes of signs. On
  // the host a buffer of `blocks` blocks per piece holds its pieces one after the other, each as `blocks`
  // blocks of stride(k) bytes: that piece's signs, and after the last piece's the scale (a device's buffers
  // hold one piece: records, kernels/device_kernels.h).
  size_t begin(size_t k) const { return k * pieceLen_; }
  size_t length(size_t k) const { return std::min(pieceLen_, L_ - begin(k)); }
  size_t block(size_t k) const { return length(k) / 8; }
  size_t stride(size_t k) const { return block(k) + (k + 1 == pieces_ ? sizeof(T) : 0); }
  uint8_t* at(const Buffer& b, int blocks, size_t k) const { return b.as<uint8_t>() + size_t(blocks) * begin(k) / 8; }

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

  // Steps 1-4 on a device, one kernel a pass, in one piece (its kernels queue on the lane's stream already):
  // x = pad(input) + worker_error and s_w = ||x|| / sqrt(P); records of sign(x) and s_w, worker_error = x -
  // s_w * sign(x); then c = server_error + sum_j (s_j / W) * sign_j over the records received and s_s = ||c|| /
  // sqrt(P/W); this rank's record of sign(c) and s_s, server_error = c - s_s * sign(c); then every output chunk
  // j = s_s(j) * sign_j.
  void runOnDevice(Collectives& c, const void* in, void* out) {
    T* scales = scales_.as<T>();
    k_.addAndScale(worker_.as<T>(), input(in), n_, P_, scales, nonFinite_.as<uint32_t>());
    k_.packRecords(worker_.as<T>(), L_, W_, scales, send_.as<uint8_t>(), recordBytes_);
    c.allToAll(send_.get(), received_.get(), size_t(W_), recordBytes_, Algo::Auto);
    k_.accumulateRecords({received_.as<uint8_t>(), recordBytes_, W_}, T(W_), server_.as<T>(), L_, scales + 1);
    k_.packRecords(server_.as<T>(), L_, 1, scales + 1, mine_.as<uint8_t>(), recordBytes_);
    c.allGather(mine_.get(), gathered_.get(), recordBytes_, Algo::Auto);
    writeOut(0, n_, out, [&](T* dst) { k_.unpackRecords({gathered_.as<uint8_t>(), recordBytes_, W_}, L_, n_, dst); });
  }

  // The same steps on the host, in fewer passes over memory and with the wire beside them. The worker and
  // server buffers keep x and c rather than their errors, which the next step settles (x - s * sign(x)) in the
  // pass that reads them, packing the new signs in that pass too (onebit.h's settleAddPackSigns): neither side
  // makes a pass of its own to pack, and the values are the device form's bit for bit. Signs need no scale,
  // so each piece's signs travel while the pass goes on, and the scale, known once the pass is done, rides with
  // the last piece: one piece is the device's record, and the wire carries the same bytes however many.
  void runOnHost(Collectives& c, const void* in, void* out) {
    T* scales = scales_.as<T>();
    const T lastWorker = scales[0], lastServer = scales[1];
    const T* x = input(in);
    kernels::SquareSums sums;
    runInPieces(helper_.get(), pieces_, 1, [&](int s, size_t k) { if (s == 0) workerPass(k, x, lastWorker, sums); },
                [&](int, size_t k) { c.allToAll(at(send_, W_, k), at(received_, W_, k), size_t(W_), stride(k), Algo::Auto); });
    for (int j = 0; j < W_; ++j) weights_[size_t(j)] = scaleOf(received_, j) / T(W_);
    double squares = 0;
    runInPieces(helper_.get(), pieces_, 1, [&](int s, size_t k) { if (s == 0) squares = accumulate(k, lastServer, squares); },
                [&](int, size_t k) { c.allGather(at(mine_, 1, k), at(gathered_, W_, k), stride(k), Algo::Auto); });
    unpackOnHost(out);
  }

  // Step 1 and the first half of 2 for what piece k's move needs, chunk by chunk in order (the sum of squares'
  // order): with piece 0 every chunk but the last, then piece k of the last; after the last piece, s_w =
  // ||x|| / sqrt(P) after every block of it. Piece k of chunk j: x = settled x + pad(input), its signs into
  // block j of the piece.
  void workerPass(size_t k, const T* x, T carried, kernels::SquareSums& sums) {
    for (int j = 0; k == 0 && j + 1 < W_; ++j) {
      for (size_t p = 0; p < pieces_; ++p) workerSegment(j, p, x, carried, sums);
    }
    workerSegment(W_ - 1, k, x, carried, sums);
    if (k + 1 < pieces_) return;
    T* scale = scales_.as<T>();
    kernels::rms(sums.total() + kernels::sumSquares(worker_.as<T>() + n_, P_ - n_), P_, scale, nonFinite_.as<uint32_t>());
    for (int j = 0; j < W_; ++j) std::memcpy(at(send_, W_, k) + size_t(j) * stride(k) + block(k), scale, sizeof(T));
  }

  void workerSegment(int j, size_t k, const T* x, T carried, kernels::SquareSums& sums) {
    const size_t first = size_t(j) * L_ + begin(k), added = first < n_ ? std::min(length(k), n_ - first) : 0;
    kernels::settleAddPackSigns(worker_.as<T>() + first, x + std::min(first, n_), added, length(k), carried,
                                at(send_, W_, k) + size_t(j) * stride(k), sums);
  }

  // Step 3 on piece k: c = settled c + sum_j (s_j / W) * sign_j over the W blocks received (added in rank
  // order), its signs into this rank's block of the piece; returns `squares` plus the sum of the new c^2; after
  // the last piece, s_s = ||c|| / sqrt(P/W) after this rank's block.
  double accumulate(size_t k, T carried, double squares) {
    for (int j = 0; j < W_; ++j) sources_[size_t(j)] = at(received_, W_, k) + size_t(j) * stride(k);
    squares = kernels::accumulateSigns(sources_.data(), weights_.data(), W_, server_.as<T>() + begin(k), length(k), squares,
                                       carried, at(mine_, 1, k));
    if (k + 1 == pieces_) {
      kernels::rms(squares, L_, scales_.as<T>() + 1, nullptr);
      std::memcpy(at(mine_, 1, k) + block(k), scales_.as<T>() + 1, sizeof(T));
    }
    return squares;
  }

  // Step 4: output chunk j = s_s(j) * sign_j, piece by piece, trimmed to the tensor's length; streamed past the
  // cache where the output is large, as the CPU kernels' unpackRecords.
  void unpackOnHost(void* out) {
    const auto unpack = n_ * sizeof(T) >= kernels::kStreamBytes ? kernels::unpackScaledStreaming<T> : kernels::unpackScaled<T>;
    for (int j = 0; j < W_; ++j) {
      const T scale = scaleOf(gathered_, j);
      for (size_t k = 0; k < pieces_ && size_t(j) * L_ + begin(k) < n_; ++k) {
        const size_t first = size_t(j) * L_ + begin(k), len = std::min(length(k), n_ - first);
        writeOut(first, len, out, [&](T* dst) { unpack(at(gathered_, W_, k) + size_t(j) * stride(k), len, scale, dst); });
      }
    }
  }

  // The scale rank j's block of the last piece carries, in a buffer of W blocks a piece.
  T scaleOf(const Buffer& b, int j) const {
    T s;
    std::memcpy(&s, at(b, W_, pieces_ - 1) + size_t(j) * stride(pieces_ - 1) + block(pieces_ - 1), sizeof(T));
    return s;
  }

  // Output elements first .. first + len - 1, which fill writes as T: into the output itself, or into scratch
  // and then rounded to the tensor's halves.
  template <class Fill>
  void writeOut(size_t first, size_t len, void* out, Fill&& fill) {
    T* dst = (wide_.get() ? wide_.as<T>() : static_cast<T*>(out)) + first;
    fill(dst);
    if constexpr (std::is_same_v<T, float>) {
      if (wide_.get()) k_.fromF32(dt_, dst, static_cast<uint8_t*>(out) + first * elementSize(dt_), len);
    }
  }

  // The error a buffer holds, settled with scale `scale` where the host keeps it unsettled.
  NamedBuffer fetch(const char* name, const Buffer& b, int scale) const {
    NamedBuffer out{name, kComputeType<T>, std::vector<uint8_t>(b.bytes())};
    m_.download(out.data.data(), b.get(), b.bytes());
    if (m_.isHost() && b.bytes() > 0) {
      std::vector<uint8_t> signs(b.bytes() / sizeof(T) / 8);
      kernels::packSignsKeepError(reinterpret_cast<T*>(out.data.data()), b.bytes() / sizeof(T), scales_.as<T>()[scale], signs.data());
    }
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
  const size_t recordBytes_;        // a device's record: one rank's chunk of signs and its scale
  int64_t step_ = 0;
  Buffer worker_, server_;
  Buffer wide_;  // halves only: the widened input, then the output before rounding
  Buffer send_, received_, mine_, gathered_;
  Buffer scales_;     // s_w, then s_s (on the host: the last step's until the new ones are known)
  Buffer nonFinite_;  // set when s_w is not finite
  std::vector<const uint8_t*> sources_;  // the host's: the blocks of a piece the server sums
  std::vector<T> weights_;               // and their weights, s_w(j) / W
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
