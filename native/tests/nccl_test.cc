// The nccl backend alone, one rank: the declared ABI values, a communicator over the library NCCL_LIBRARY
// names, and each of NCCL's own collectives on it (at world size 1 each is a copy, which still
// exercises loading, staging through device memory, the stream wait and the error paths); the lane over
// device memory, its exchanges and a split of it (where the library has ncclCommSplit); and the 1-bit and
// quantized allreduces run in device memory against the same ops in host memory (on a GPU: the CUDA
// kernels in the ops they serve).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backends/nccl/nccl_backend.h"
#include "backends/nccl/nccl_library.h"
#include "estimating/compressed_allreduce.h"
#include "base/error.h"
#include "estimating/quantized_allreduce.h"

using namespace spmd;

// The values NCCL's documentation gives; a wrong one would silently change what a call does.
static_assert(ncclFloat32 == 7 && ncclFloat64 == 8 && ncclInt32 == 2 && ncclInt64 == 4 && ncclBfloat16 == 9);
static_assert(ncclSum == 0 && ncclMax == 2 && ncclMin == 3 && ncclAvg == 4);
static_assert(ncclSystemError == 2 && ncclRemoteError == 6 && ncclInProgress == 7);
static_assert(sizeof(ncclUniqueId) == 128);

namespace {

int failures = 0;

void expect(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "FAIL: %s\n", what);
    ++failures;
  }
}

// `out` as the device lane `d` leaves it after run(in, out), both `count` floats in `m`.
template <class Run>
std::vector<float> onDevice(Memory& m, const std::vector<float>& in, size_t count, Run run) {
  Buffer din(m, in.size() * sizeof(float)), dout(m, count * sizeof(float));
  m.upload(din.get(), in.data(), in.size() * sizeof(float));
  run(din.get(), dout.get());
  m.synchronize();
  std::vector<float> out(count);
  m.download(out.data(), dout.get(), count * sizeof(float));
  return out;
}

void deviceLane(Backend& backend, const std::vector<float>& in, bool canSplit) {
  Memory& m = backend.memory();
  Collectives& d = backend.deviceLane(0);
  const size_t n = in.size(), bytes = n * sizeof(float);
  auto same = [&](const char* what, auto run) { expect(onDevice(m, in, n, run) == in, what); };
  same("device allreduce", [&](void* i, void* o) { d.allreduce(i, o, n, DType::F32, RedOp::Sum, Algo::Auto); });
  same("device allreduce, ring on the host", [&](void* i, void* o) { d.allreduce(i, o, n, DType::F32, RedOp::Sum, Algo::Ring); });
  same("device reduce_scatter", [&](void* i, void* o) { d.reduceScatter(i, o, n, DType::F32, RedOp::Sum, Algo::Auto); });
  same("device all_gather", [&](void* i, void* o) { d.allGather(i, o, bytes, Algo::Auto); });
  same("device all_to_all", [&](void* i, void* o) { d.allToAll(i, o, n, sizeof(float), Algo::Auto); });
  same("device gather", [&](void* i, void* o) { d.gather(i, o, bytes, 0, Algo::Auto); });
  same("device scatter", [&](void* i, void* o) { d.scatter(i, o, n, sizeof(float), 0, Algo::Auto); });
  same("device send_recv", [&](void* i, void* o) { d.sendRecv(i, o, bytes, d.rank(), d.rank()); });
  expect(d.resolve(OpKind::Gather, Algo::Auto, bytes) == Algo::Direct, "device gather is a direct exchange");
  if (!canSplit) {
    try {
      d.split(0, 0);
      expect(false, "a split without ncclCommSplit throws");
    } catch (const CommError& e) {
      expect(std::string(e.code()) == code::kUnsupported, "a split without ncclCommSplit is ERR_SPMD_UNSUPPORTED");
    }
    return;
  }
  std::unique_ptr<Collectives> sub = d.split(0, 0);
  expect(sub->rank() == 0 && sub->size() == 1, "the split's rank and size");
  same("allreduce on a split", [&](void* i, void* o) { sub->allreduce(i, o, n, DType::F32, RedOp::Sum, Algo::Auto); });
}

// The estimating ops in the backend's memory against the same ops in host memory over the lane's host
// pointers, for a few steps (error feedback carries state between them).
void estimatingOps(Backend& backend, bool canSplit) {
  Memory& m = backend.memory();
  const size_t n = 4096;
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = std::sin(float(i) * 0.37f) * float(1 + i % 7);
  auto compare = [&](const char* what, EstimatingOp& host, EstimatingOp& device, Collectives& d, bool exact) {
    std::vector<float> want(n), got;
    for (int step = 0; step < 3; ++step) {
      host.run(backend.lane(0), x.data(), want.data());
      got = onDevice(m, x, n, [&](void* i, void* o) { device.run(d, i, o); });
    }
    bool ok = true;
    // The 1-bit scales come from sums of squares, which a GPU adds in another order: an ulp or so.
    for (size_t i = 0; i < n; ++i) ok &= exact ? got[i] == want[i] : std::fabs(got[i] - want[i]) <= 1e-6f * std::fabs(want[i]);
    expect(ok, what);
  };
  auto hostOneBit = makeCompressedAllreduce(hostMemory(), 0, 1, n, DType::F32, {});
  auto deviceOneBit = makeCompressedAllreduce(m, 0, 1, n, DType::F32, {});
  compare("compressed_allreduce in device memory", *hostOneBit, *deviceOneBit, backend.deviceLane(0), false);
  if (!canSplit) return;
  QuantizedSpec spec;
  spec.bits = 4;
  spec.gatherBits = 8;
  spec.groupSize = 250;
  spec.errorFeedback = true;
  auto hostQuantized = makeQuantizedAllreduce(hostMemory(), backend.lane(0), n, DType::F32, spec, true, true);
  auto deviceQuantized = makeQuantizedAllreduce(m, backend.deviceLane(0), n, DType::F32, spec, true, true);
  compare("quantized_allreduce in device memory", *hostQuantized, *deviceQuantized, backend.deviceLane(0), true);
}

}  // namespace

int main() {
  const char* library = std::getenv("NCCL_LIBRARY");
  if (!library) {
    std::puts("nccl_test: NCCL_LIBRARY unset, skipped");
    return 77;
  }
  try {
    nccl::NcclOptions o;
    o.library = library;
    o.ids = {nccl::uniqueId(library)};
    expect(nccl::dataType(DType::F32) == ncclFloat32 && nccl::dataType(DType::BF16) == ncclBfloat16, "dtype mapping");
    expect(nccl::redOp(RedOp::Max) == ncclMax && nccl::redOp(RedOp::Min) == ncclMin, "reduction mapping");
    std::unique_ptr<Backend> backend = nccl::makeBackend(o);
    backend->connect();
    Collectives& c = backend->lane(0);
    c.setDeadline(Transport::Clock::now() + std::chrono::seconds(30));
    const std::vector<float> in{1.5f, -2.f, 3.f};
    std::vector<float> out(3, 0.f);
    c.allreduce(in.data(), out.data(), 3, DType::F32, RedOp::Sum, Algo::Auto);
    expect(out == in, "allreduce");
    out.assign(3, 0.f);
    c.reduceScatter(in.data(), out.data(), 3, DType::F32, RedOp::Max, Algo::Auto);
    expect(out == in, "reduce_scatter");
    out.assign(3, 0.f);
    c.allGather(in.data(), out.data(), 3 * sizeof(float), Algo::Auto);
    expect(out == in, "all_gather");
    out = in;
    c.broadcast(out.data(), 3 * sizeof(float), 0, Algo::Auto);
    expect(out == in, "broadcast");
    out.assign(3, 0.f);
    c.reduce(in.data(), out.data(), 3, DType::F32, RedOp::Min, 0, Algo::Auto);
    expect(out == in, "reduce");
    c.barrier(Algo::Auto);
    expect(c.resolve(OpKind::AllReduce, Algo::Auto, 12) == Algo::Nccl, "auto resolves to NCCL's own allreduce");
    const bool canSplit = nccl::load(library).commSplit != nullptr;
    deviceLane(*backend, in, canSplit);
    estimatingOps(*backend, canSplit);
  } catch (const CommError& e) {
    std::fprintf(stderr, "FAIL: %s: %s\n", e.code(), e.what());
    return 1;
  }
  try {
    nccl::load("/nonexistent/libnccl.so.2");
    expect(false, "loading a missing library throws");
  } catch (const CommError& e) {
    expect(std::string(e.code()) == code::kUnsupported, "a missing library is ERR_SPMD_UNSUPPORTED");
  }
  std::printf("nccl_test: %s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
