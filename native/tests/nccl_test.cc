// The nccl backend alone, one rank: the declared ABI values, a communicator over the library NCCL_LIBRARY
// names, and each of NCCL's own collectives on it (at world size 1 each is a copy, which still
// exercises loading, staging through device memory, the stream wait and the error paths).
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backends/nccl/nccl_backend.h"
#include "backends/nccl/nccl_library.h"
#include "core/error.h"

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
    o.id = nccl::uniqueId(library);
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
    c.barrier();
    expect(c.resolve(OpKind::AllReduce, Algo::Auto, 12) == Algo::Nccl, "auto resolves to NCCL's own allreduce");
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
