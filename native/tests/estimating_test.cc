// The estimating ops keep their non-finite flags where their memory is: a step (run) never copies from that
// memory to the host, so on a device no timed step waits on a download; verify(), called after the step's
// timing, reads the flags once and names the rank. Over a Memory that counts its downloads, at W = 1.
#include <cmath>
#include <string>
#include <vector>

#include "estimating/compressed_allreduce.h"
#include "base/error.h"
#include "estimating/quantized_allreduce.h"
#include "runtime/transport_collectives.h"
#include "harness.h"

namespace {

using namespace spmd;
using spmd::testing::check;

class CountingMemory final : public Memory {
 public:
  int downloads = 0;
  bool isHost() const override { return false; }
  void* alloc(size_t bytes) override { return hostMemory().alloc(bytes); }
  void free(void* p) override { hostMemory().free(p); }
  void upload(void* dst, const void* src, size_t bytes) override { hostMemory().upload(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override {
    ++downloads;
    hostMemory().download(dst, src, bytes);
  }
  void copy(void* dst, const void* src, size_t bytes) override { hostMemory().copy(dst, src, bytes); }
  void zero(void* dst, size_t bytes) override { hostMemory().zero(dst, bytes); }
  void synchronize() override {}
  kernels::DeviceKernels& kernels() override { return hostMemory().kernels(); }
};

struct Alone : Transport {
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void exchange(std::span<const SendSpec>, std::span<const RecvSpec>) override {}
};

void runThenVerify(const char* what, EstimatingOp& op, Collectives& c, CountingMemory& m, std::vector<float>& in) {
  std::vector<float> out(in.size());
  for (int step = 0; step < 3; ++step) op.run(c, in.data(), out.data());
  check(m.downloads == 0, std::string(what) + ": steps download nothing (" + std::to_string(m.downloads) + ")");
  op.verify();
  check(m.downloads == 1, std::string(what) + ": verify reads the flags in one download (" + std::to_string(m.downloads) + ")");
  in[5] = NAN;
  op.run(c, in.data(), out.data());
  try {
    op.verify();
    check(false, std::string(what) + ": a NaN input is reported");
  } catch (const CommError& e) {
    check(std::string(e.what()).find("rank 0") != std::string::npos, std::string(what) + ": names the rank: " + e.what());
  }
}

void testFlagsStayInMemory() {
  Alone t;
  TransportCollectives c(t, [](const std::string&) {});
  std::vector<float> in(4096);
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(int(i % 17) - 8);
  CountingMemory m1;
  auto onebit = makeCompressedAllreduce(m1, 0, 1, in.size(), DType::F32, {});
  runThenVerify("compressed_allreduce", *onebit, c, m1, in);
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(int(i % 17) - 8);
  CountingMemory m2;
  QuantizedSpec spec;
  auto quantized = makeQuantizedAllreduce(m2, c, in.size(), DType::F32, spec, true, false);
  runThenVerify("quantized_allreduce", *quantized, c, m2, in);
}

}  // namespace

int main() { return spmd::testing::runTests({{"flags stay in memory", testFlagsStayInMemory}}); }
