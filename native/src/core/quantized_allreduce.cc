#include "core/quantized_allreduce.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/quant.h"

namespace spmd {
namespace {

using kernels::QuantFormat;

std::vector<float> floats(bool wanted, size_t n) { return std::vector<float>(wanted ? n : 0, 0.0f); }

class HierarchicalQuantized final : public EstimatingOp {
 public:
  HierarchicalQuantized(Collectives& world, size_t n, DType dt, const QuantizedSpec& s, bool full, bool mean)
      : rank_(world.rank()), W_(world.size()), L_(s.localSize), N_(W_ / L_), n_(n), B_(n / size_t(W_)), dt_(dt),
        full_(full), mean_(mean), feedback_(s.errorFeedback), beta_(s.beta),
        format_{s.bits, s.groupSize}, gatherFormat_{s.gatherBits, s.groupSize},
        recordBytes_(format_.bytes(B_)), gatherBytes_(full ? gatherFormat_.bytes(B_) : 0),
        intra_(world.split(rank_ / L_, rank_ % L_)), inter_(world.split(rank_ % L_, rank_ / L_)),
        wideIn_(floats(dt != DType::F32, n)), block_(floats(full || dt != DType::F32, B_)),
        wideOut_(floats(full && dt != DType::F32, n)), scratch_(std::min(B_, s.groupSize)),
        intraError_(floats(feedback_, n)), interError_(floats(feedback_, size_t(N_) * B_)),
        gatherError_(floats(feedback_ && full, B_)),
        send1_(size_t(W_) * recordBytes_), recv1_(send1_.size()), send2_(size_t(N_) * recordBytes_),
        recv2_(send2_.size()), gatherSend_(gatherBytes_), gathered_(size_t(W_) * gatherBytes_),
        sources_(size_t(std::max(L_, N_))) {}

  void run(Collectives& world, const void* in, void* out) override {
    const float* x = input(in);
    // 1. Block j into slot j/L of record j%L.
    for (int j = 0; j < W_; ++j) {
      uint8_t* slot = send1_.data() + (size_t(j % L_) * size_t(N_) + size_t(j / L_)) * recordBytes_;
      requireFinite(kernels::quantize(format_, x + size_t(j) * B_, error(intraError_, size_t(j) * B_), beta_, B_, slot),
                    "input");
    }
    intra_->allToAll(send1_.data(), recv1_.data(), size_t(L_), size_t(N_) * recordBytes_, Algo::Auto);
    // 2. Slot a of every local rank's record: the node's copies of block a·L + l, summed and requantized.
    for (int a = 0; a < N_; ++a) {
      for (int l = 0; l < L_; ++l) sources_[size_t(l)] = recv1_.data() + (size_t(l) * size_t(N_) + size_t(a)) * recordBytes_;
      requireFinite(kernels::dequantizeSumQuantize(format_, sources_.data(), L_, error(interError_, size_t(a) * B_), beta_,
                                                   B_, scratch_.data(), send2_.data() + size_t(a) * recordBytes_),
                    "node's sums");
    }
    inter_->allToAll(send2_.data(), recv2_.data(), size_t(N_), recordBytes_, Algo::Auto);
    // 3. Every node's sum of block r.
    for (int a = 0; a < N_; ++a) sources_[size_t(a)] = recv2_.data() + size_t(a) * recordBytes_;
    float* block = block_.empty() ? static_cast<float*>(out) : block_.data();
    kernels::dequantizeSum(format_, sources_.data(), N_, B_, block);
    if (mean_) kernels::divideInPlace(DType::F32, block, B_, W_);
    if (!full_) {
      if (block != out) kernels::fromF32(dt_, block, out, B_);
      return;
    }
    // 4. Every rank's block to every rank.
    requireFinite(kernels::quantize(gatherFormat_, block, error(gatherError_, 0), beta_, B_, gatherSend_.data()), "reduced block");
    world.allGather(gatherSend_.data(), gathered_.data(), gatherBytes_, Algo::Auto);
    float* all = wideOut_.empty() ? static_cast<float*>(out) : wideOut_.data();
    for (int j = 0; j < W_; ++j) kernels::dequantize(gatherFormat_, gathered_.data() + size_t(j) * gatherBytes_, B_, all + size_t(j) * B_);
    if (all != out) kernels::fromF32(dt_, all, out, n_);
  }

  // Each step sends a record of N blocks to the L-1 other local ranks, one block to the N-1 other ranks of
  // this local index, and (full output) this rank's block to the W-1 others.
  size_t wireBytes() const override {
    return size_t(L_ - 1) * size_t(N_) * recordBytes_ + size_t(N_ - 1) * recordBytes_ + size_t(W_ - 1) * gatherBytes_;
  }

  std::vector<NamedBuffer> state() const override {
    std::vector<NamedBuffer> s;
    if (!feedback_) return s;
    s.push_back(buffer("intra_error", intraError_));
    s.push_back(buffer("inter_error", interError_));
    if (full_) s.push_back(buffer("gather_error", gatherError_));
    return s;
  }

 private:
  const float* input(const void* in) {
    if (wideIn_.empty()) return static_cast<const float*>(in);
    kernels::toF32(dt_, in, wideIn_.data(), n_);
    return wideIn_.data();
  }

  float* error(std::vector<float>& e, size_t offset) { return feedback_ ? e.data() + offset : nullptr; }

  // A NaN or infinity would be quantized to garbage and, with error feedback, stay in the errors; say so.
  void requireFinite(bool finite, const char* what) const {
    if (finite) return;
    throw CommError(code::kInvalid, "quantized_allreduce: rank " + std::to_string(rank_) + " has NaN or infinite values in its " +
                                        what + " (a non-finite input, or sums that overflow float32)");
  }

  static NamedBuffer buffer(const char* name, const std::vector<float>& v) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(v.data());
    return {name, DType::F32, std::vector<uint8_t>(bytes, bytes + v.size() * sizeof(float))};
  }

  const int rank_, W_, L_, N_;
  const size_t n_, B_;
  const DType dt_;
  const bool full_, mean_, feedback_;
  const float beta_;
  const QuantFormat format_, gatherFormat_;
  const size_t recordBytes_, gatherBytes_;  // one block quantized, for the all-to-alls and the all-gather
  std::unique_ptr<Collectives> intra_, inter_;
  std::vector<float> wideIn_;   // the input in float32, unless it is float32
  std::vector<float> block_;    // block r of the result, unless it goes straight to the output
  std::vector<float> wideOut_;  // full output in float32, unless it is float32
  std::vector<float> scratch_;
  std::vector<float> intraError_, interError_, gatherError_;
  std::vector<uint8_t> send1_, recv1_, send2_, recv2_, gatherSend_, gathered_;
  std::vector<const uint8_t*> sources_;
};

}  // namespace

std::unique_ptr<EstimatingOp> makeQuantizedAllreduce(Collectives& world, size_t count, DType dt,
                                                     const QuantizedSpec& spec, bool full, bool mean) {
  const int W = world.size();
  auto invalid = [](const std::string& what) { return CommError(code::kInvalid, "quantized_allreduce: " + what); };
  if (!isFloat(dt)) throw invalid("needs a floating-point tensor, got " + std::string(dtypeName(dt)));
  if (spec.localSize < 1 || W % spec.localSize != 0) {
    throw invalid("local size " + std::to_string(spec.localSize) + " does not divide the world size " + std::to_string(W));
  }
  for (int bits : {spec.bits, spec.gatherBits}) if (bits != 4 && bits != 8) throw invalid("bits must be 4 or 8");
  if (spec.groupSize < 2 || spec.groupSize % 2 != 0) throw invalid("groupSize must be even");
  const bool int4 = spec.bits == 4 || (full && spec.gatherBits == 4);
  const size_t multiple = size_t(W) * (int4 ? 2 : 1);
  if (count % multiple != 0) {
    throw invalid("count " + std::to_string(count) + " is not a multiple of " + std::to_string(multiple));
  }
  return std::make_unique<HierarchicalQuantized>(world, count, dt, spec, full, mean);
}

}  // namespace spmd
