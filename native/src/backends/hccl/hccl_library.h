// HCCL as a library::Library: the project's types as HCCL's enums, HcclBatchSendRecv for exchanges.
// HCCL documents no abort: at a deadline the communicator is given up and left to the process exit.
#pragma once
#include "backends/hccl/hccl_api.h"
#include <array>
#include <vector>

#include "backends/library/library.h"

namespace spmd::hccl {

class HcclLibrary : public library::Library {
 public:
  explicit HcclLibrary(const Api& api) : api_(api) {}
  const char* name() const override { return "HCCL"; }
  const char* errorCode() const override;
  Algo algo() const override { return Algo::Hccl; }
  const char* call(library::Call c) const override;
  std::string describe(int r) const override;

  int allReduce(const void* in, void* out, size_t count, DType dt, RedOp op, library::Handle c, library::Stream s) override;
  int reduceScatter(const void* in, void* out, size_t blockCount, DType dt, RedOp op, library::Handle c,
                    library::Stream s) override;
  int allGather(const void* in, void* out, size_t bytes, library::Handle c, library::Stream s) override;
  int broadcast(void* data, size_t bytes, int root, library::Handle c, library::Stream s) override;
  int reduce(const void* in, void* out, size_t count, DType dt, RedOp op, int root, library::Handle c,
             library::Stream s) override;
  int exchange(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs, library::Handle c,
               library::Stream s) override;
  bool hasAllToAllv() const override { return api_.alltoallv != nullptr; }
  int allToAllv(const void* in, void* out, const AllToAllvCounts& c, size_t esize, library::Handle h, library::Stream s) override;
  // HCCL's sub-communicators (HcclCreateSubCommConfig) are not wired: split() is never called.
  std::string splitMissing() const override { return "hccl: sub-communicators are not supported by this backend yet"; }
  int split(library::Handle, int, int, library::Handle&) override { return HCCL_E_NOT_SUPPORT; }
  bool asyncError(library::Handle c, int& result) override;
  bool abort(library::Handle) override { return false; }
  void destroy(library::Handle c) override { api_.commDestroy(c); }

 private:
  const Api& api_;
  std::vector<HcclSendRecvItem> items_;  // reused across exchanges
  std::array<std::vector<uint64_t>, 4> v_;  // all_to_allv's byte counts and displacements, reused
};

HcclDataType dataType(DType dt);
HcclReduceOp redOp(RedOp op);
const char* resultName(HcclResult r);
// "<name> (<number>)[: HcclGetErrorString's text]".
std::string describe(const Api& api, HcclResult r);

}  // namespace spmd::hccl
