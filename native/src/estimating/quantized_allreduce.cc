#include "estimating/quantized_allreduce.h"

#include <algorithm>
#include <functional>
#include <string>
#include <utility>

#include "base/error.h"
#include "base/lane_worker.h"
#include "estimating/pieces.h"

namespace spmd {
namespace {

using kernels::QuantFormat;

// Which node each rank is on and its index there; every node holds L ranks.
struct Layout {
  int N = 0, L = 0;
  std::vector<int> node, local;
};

// The three quantizations whose values the op checks, each with its own flag in device memory.
enum Check { kInput, kNodeSums, kReducedBlock, kChecks };
constexpr const char* kChecked[kChecks] = {"input", "node's sums", "reduced block"};

// The default piece where a step crosses hosts: whole groups of at least 256 Ki values of every block (128 KiB
// of int4 codes per message), where a block holds kMinPieces of them; smaller blocks run in one piece. Measured
// on 2 hosts over 1 Gbit/s (docs/PERFORMANCE.md): at 16 Mi float32 pieces of 64 Ki to 512 Ki values overlap
// about as well, 256 Ki a little best; at 4 Mi 2 pieces gained nothing, 4 and 8 did; at 1 Mi no piece size beat
// one piece. Within one host there is no wire to wait on, only memory traffic, and pieces cost up to 15%.
constexpr size_t kPieceValues = 256 * 1024, kMinPieces = 4;

// Groups of each block per piece: the spec's, else the default where there is a link to overlap (host memory,
// ranks on several hosts), else one piece (a device's kernels queue on the lane's stream already); at most the
// block's groups, at least 1.
size_t groupsPerPiece(const QuantizedSpec& s, size_t blockGroups, bool overlap) {
  size_t g = s.pieceGroups;
  if (g == 0) {
    g = (kPieceValues + s.groupSize - 1) / s.groupSize;
    if (!overlap || blockGroups < kMinPieces * g) g = blockGroups;
  }
  return std::max<size_t>(1, std::min(g, blockGroups));
}

class HierarchicalQuantized final : public EstimatingOp {
 public:
  HierarchicalQuantized(Memory& m, Collectives& world, size_t n, DType dt, const QuantizedSpec& s, Layout layout, bool full, bool mean)
      : m_(m), k_(m.kernels()), layout_(std::move(layout)), rank_(world.rank()), W_(world.size()), L_(layout_.L), N_(layout_.N), n_(n),
        B_(n / size_t(W_)), dt_(dt), full_(full), mean_(mean), feedback_(s.errorFeedback), beta_(s.beta),
        format_{s.bits, s.groupSize}, gatherFormat_{s.gatherBits, s.groupSize},
        recordBytes_(format_.bytes(B_)), gatherBytes_(full ? gatherFormat_.bytes(B_) : 0),
        pieceLen_(groupsPerPiece(s, format_.groups(B_), m.isHost() && !s.nodeOf.empty() && N_ > 1) * s.groupSize),
        pieces_(B_ == 0 ? 1 : (B_ + pieceLen_ - 1) / pieceLen_),
        intra_(world.split(node(rank_), local(rank_))), inter_(world.split(local(rank_), node(rank_))),
        wideIn_(floats(dt != DType::F32, n)), block_(floats(full || dt != DType::F32, B_)),
        wideOut_(floats(full && dt != DType::F32, n)), intraError_(errors(feedback_, n)),
        interError_(errors(feedback_, size_t(N_) * B_)), gatherError_(errors(feedback_ && full, B_)),
        send1_(m, size_t(W_) * recordBytes_), recv1_(m, send1_.bytes()), send2_(m, size_t(N_) * recordBytes_),
        recv2_(m, send2_.bytes()), gatherSend_(m, gatherBytes_), gathered_(m, size_t(W_) * gatherBytes_),
        nonFinite_(Buffer::zeros(m, kChecks * sizeof(uint32_t))),
        helper_(pieces_ > 1 && m.isHost() ? std::make_unique<LaneWorker>() : nullptr) {}

  void run(Collectives& world, const void* in, void* out) override {
    const StepPointers step{input(in), block_.get() ? block_.as<float>() : static_cast<float*>(out),
                    wideOut_.get() ? wideOut_.as<float>() : static_cast<float*>(out), out};
    runInPieces(helper_.get(), pieces_, full_ ? 3 : 2, [&](int s, size_t k) { compute(s, k, step); },
                [&](int s, size_t k) { move(world, s, k); });
  }

  // Each step sends a record of N blocks to the L-1 other local ranks, one block to the N-1 other ranks of
  // this local index, and (full output) this rank's block to the W-1 others.
  size_t wireBytes() const override {
    return size_t(L_ - 1) * size_t(N_) * recordBytes_ + size_t(N_ - 1) * recordBytes_ + size_t(W_ - 1) * gatherBytes_;
  }

  std::vector<NamedBuffer> state() const override {
    std::vector<NamedBuffer> s;
    if (!feedback_) return s;
    s.push_back(fetch("intra_error", intraError_));
    s.push_back(fetch("inter_error", interError_));
    if (full_) s.push_back(fetch("gather_error", gatherError_));
    return s;
  }

  // A NaN or infinity would be quantized to garbage and, with error feedback, stay in the errors; say so.
  void verify() const override {
    const int c = firstRaised(m_, nonFinite_, kChecks);
    if (c < 0) return;
    throw CommError(code::kInvalid, "quantized_allreduce: rank " + std::to_string(rank_) + " has NaN or infinite values in its " +
                                        kChecked[c] + " (a non-finite input, or sums that overflow float32)");
  }

 private:
  // Where a step reads and writes in float32: the input, block r of the result, the full output.
  struct StepPointers {
    const float* x;
    float* block;
    float* all;
    void* out;
  };

  // Piece k: elements begin(k) .. begin(k) + length(k) - 1 of every block, whole groups (a block's short
  // last group in its last piece), so each quantization sees the values, errors and groups of the whole
  // block, and the bits do not depend on the pieces. A buffer of `records` records per piece holds its
  // pieces one after the other, each laid out as the whole-block form lays out its records.
  size_t begin(size_t k) const { return k * pieceLen_; }
  size_t length(size_t k) const { return std::min(pieceLen_, B_ - begin(k)); }
  uint8_t* at(const Buffer& b, const QuantFormat& f, int records, size_t k) const {
    return b.as<uint8_t>() + size_t(records) * f.bytes(begin(k));
  }
  void* outAt(void* out, size_t element) const { return static_cast<uint8_t*>(out) + element * elementSize(dt_); }

  // The step's moves in order: the node's all-to-all, the all-to-all across nodes, the all-gather (full).
  void move(Collectives& world, int s, size_t k) {
    const size_t rb = format_.bytes(length(k));
    if (s == 0) {
      intra_->allToAll(at(send1_, format_, W_, k), at(recv1_, format_, W_, k), size_t(L_), size_t(N_) * rb, Algo::Auto);
    } else if (s == 1) {
      inter_->allToAll(at(send2_, format_, N_, k), at(recv2_, format_, N_, k), size_t(N_), rb, Algo::Auto);
    } else {
      world.allGather(at(gatherSend_, gatherFormat_, 1, k), at(gathered_, gatherFormat_, W_, k), gatherFormat_.bytes(length(k)),
                      Algo::Auto);
    }
  }

  // The computation before move s of piece k, or after the last move.
  void compute(int s, size_t k, const StepPointers& st) {
    if (s == 0) quantizeInput(k, st.x);
    else if (s == 1) sumNode(k);
    else if (s == 2) sumNodes(k, st);
    else spread(k, st);
  }

  // 1. Block j into slot node(j) of record local(j).
  void quantizeInput(size_t k, const float* x) {
    const size_t b = begin(k), len = length(k), rb = format_.bytes(len);
    for (int j = 0; j < W_; ++j) {
      uint8_t* slot = at(send1_, format_, W_, k) + (size_t(local(j)) * size_t(N_) + size_t(node(j))) * rb;
      k_.quantize(format_, x + size_t(j) * B_ + b, error(intraError_, size_t(j) * B_ + b), beta_, len, slot, flag(kInput));
    }
  }

  // 2. Slot a of every local rank's record: the node's copies of the block bound for (a, l), summed and requantized.
  void sumNode(size_t k) {
    const size_t b = begin(k), len = length(k), rb = format_.bytes(len);
    for (int a = 0; a < N_; ++a) {
      const kernels::Strided copies{at(recv1_, format_, W_, k) + size_t(a) * rb, size_t(N_) * rb, L_};
      k_.dequantizeSumQuantize(format_, copies, error(interError_, size_t(a) * B_ + b), beta_, len,
                               at(send2_, format_, N_, k) + size_t(a) * rb, flag(kNodeSums));
    }
  }

  // 3. Every node's sum of block r; then the output (shard), or block r quantized for the all-gather (full).
  void sumNodes(size_t k, const StepPointers& st) {
    const size_t b = begin(k), len = length(k);
    float* block = st.block + b;
    k_.dequantizeSum(format_, {at(recv2_, format_, N_, k), format_.bytes(len), N_}, len, block);
    if (mean_) k_.divideInPlace(DType::F32, block, len, W_);
    if (!full_) {
      if (st.block != st.out) k_.fromF32(dt_, block, outAt(st.out, b), len);
      return;
    }
    k_.quantize(gatherFormat_, block, error(gatherError_, b), beta_, len, at(gatherSend_, gatherFormat_, 1, k), flag(kReducedBlock));
  }

  // 4. Every rank's block, dequantized into the full output.
  void spread(size_t k, const StepPointers& st) {
    const size_t b = begin(k), len = length(k), gb = gatherFormat_.bytes(len);
    for (int j = 0; j < W_; ++j) {
      float* all = st.all + size_t(j) * B_ + b;
      k_.dequantize(gatherFormat_, at(gathered_, gatherFormat_, W_, k) + size_t(j) * gb, len, all);
      if (st.all != st.out) k_.fromF32(dt_, all, outAt(st.out, size_t(j) * B_ + b), len);
    }
  }

  Buffer floats(bool wanted, size_t count) { return Buffer(m_, wanted ? count * sizeof(float) : 0); }
  Buffer errors(bool wanted, size_t count) { return Buffer::zeros(m_, wanted ? count * sizeof(float) : 0); }

  const float* input(const void* in) {
    if (!wideIn_.get()) return static_cast<const float*>(in);
    k_.toF32(dt_, in, wideIn_.as<float>(), n_);
    return wideIn_.as<float>();
  }

  float* error(const Buffer& e, size_t offset) { return feedback_ ? e.as<float>() + offset : nullptr; }
  int node(int r) const { return layout_.node[size_t(r)]; }
  int local(int r) const { return layout_.local[size_t(r)]; }
  uint32_t* flag(Check c) { return nonFinite_.as<uint32_t>() + c; }

  NamedBuffer fetch(const char* name, const Buffer& b) const {
    NamedBuffer out{name, DType::F32, std::vector<uint8_t>(b.bytes())};
    m_.download(out.data.data(), b.get(), b.bytes());
    return out;
  }

  Memory& m_;
  kernels::DeviceKernels& k_;
  const Layout layout_;
  const int rank_, W_, L_, N_;
  const size_t n_, B_;
  const DType dt_;
  const bool full_, mean_, feedback_;
  const float beta_;
  const QuantFormat format_, gatherFormat_;
  const size_t recordBytes_, gatherBytes_;  // one block quantized, for the all-to-alls and the all-gather
  const size_t pieceLen_, pieces_;          // elements of each block per piece, and pieces per step
  std::unique_ptr<Collectives> intra_, inter_;
  Buffer wideIn_;   // the input in float32, unless it is float32
  Buffer block_;    // block r of the result, unless it goes straight to the output
  Buffer wideOut_;  // full output in float32, unless it is float32
  Buffer intraError_, interError_, gatherError_;
  Buffer send1_, recv1_, send2_, recv2_, gatherSend_, gathered_;
  Buffer nonFinite_;  // one flag per Check
  std::unique_ptr<LaneWorker> helper_;  // the host's computations, where a step has several pieces; last: joined first
};

// The given nodes, or W / localSize nodes numbered node by node; local indices in rank order.
Layout layoutOf(const QuantizedSpec& s, int W, const std::function<CommError(const std::string&)>& invalid) {
  Layout out;
  out.node = s.nodeOf;
  if (out.node.empty()) {
    if (s.localSize < 1 || W % s.localSize != 0) {
      throw invalid("local size " + std::to_string(s.localSize) + " does not divide the world size " + std::to_string(W));
    }
    for (int r = 0; r < W; ++r) out.node.push_back(r / s.localSize);
  }
  if (out.node.size() != size_t(W)) throw invalid("nodeOf names " + std::to_string(out.node.size()) + " ranks, not " + std::to_string(W));
  std::vector<int> count;
  for (int a : out.node) {
    if (size_t(a) >= count.size()) count.resize(size_t(a) + 1, 0);
    out.local.push_back(count[size_t(a)]++);
  }
  out.N = int(count.size());
  out.L = count[0];
  for (size_t a = 0; a < count.size(); ++a) {
    if (count[a] != out.L) throw invalid("node " + std::to_string(a) + " holds " + std::to_string(count[a]) + " ranks and node 0 " + std::to_string(out.L));
  }
  return out;
}

}  // namespace

std::unique_ptr<EstimatingOp> makeQuantizedAllreduce(Memory& memory, Collectives& world, size_t count, DType dt,
                                                     const QuantizedSpec& spec, bool full, bool mean) {
  const int W = world.size();
  auto invalid = [](const std::string& what) { return CommError(code::kInvalid, "quantized_allreduce: " + what); };
  if (!isFloat(dt)) throw invalid("needs a floating-point tensor, got " + std::string(dtypeName(dt)));
  Layout layout = layoutOf(spec, W, invalid);
  for (int bits : {spec.bits, spec.gatherBits}) if (bits != 4 && bits != 8) throw invalid("bits must be 4 or 8");
  if (spec.groupSize < 2 || spec.groupSize % 2 != 0) throw invalid("groupSize must be even");
  const bool int4 = spec.bits == 4 || (full && spec.gatherBits == 4);
  const size_t multiple = size_t(W) * (int4 ? 2 : 1);
  if (count % multiple != 0) {
    throw invalid("count " + std::to_string(count) + " is not a multiple of " + std::to_string(multiple));
  }
  return std::make_unique<HierarchicalQuantized>(memory, world, count, dt, spec, std::move(layout), full, mean);
}

}  // namespace spmd
