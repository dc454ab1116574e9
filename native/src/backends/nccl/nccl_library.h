// NCCL as a library::Library: the project's types as NCCL's enums, grouped ncclSend/ncclRecv for
// exchanges, and the optional calls where this NCCL has them.
#pragma once
#include "backends/library/library.h"
#include "backends/nccl/nccl_api.h"

namespace spmd::nccl {

class NcclLibrary : public library::Library {
 public:
  explicit NcclLibrary(const Api& api) : api_(api) {}
  const char* name() const override { return "NCCL"; }
  const char* errorCode() const override;
  Algo algo() const override { return Algo::Nccl; }
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
  // NCCL has no all_to_allv of its own (nccl-tests' alltoall is grouped ncclSend/ncclRecv): an exchange.
  bool hasAllToAllv() const override { return false; }
  int allToAllv(const void*, void*, const AllToAllvCounts&, size_t, library::Handle, library::Stream) override { return ncclInvalidUsage; }
  std::string splitMissing() const override;
  int split(library::Handle c, int color, int key, library::Handle& child) override;
  bool asyncError(library::Handle c, int& result) override;
  bool abort(library::Handle c) override;
  void destroy(library::Handle c) override { api_.commDestroy(static_cast<ncclComm_t>(c)); }

 private:
  const Api& api_;
};

// The one conversion of each project type to NCCL's (exposed for the tests of the enum mapping).
ncclDataType_t dataType(DType dt);
ncclRedOp_t redOp(RedOp op);

}  // namespace spmd::nccl
