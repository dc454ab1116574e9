// A vendor collective library (NCCL, HCCL) as the shared backend code sees it: each adapter turns the
// project's types into its vendor's enums and calls, and its result codes into text. Everything that
// does not depend on the vendor's ABI (device memory, waiting with deadlines and async errors, the shared
// algorithms over the vendor's send/recv, sub-communicators) is written once against this.
#pragma once
#include <cstddef>
#include <span>
#include <string>

#include "base/collectives.h"
#include "base/transport.h"

namespace spmd::library {

using Handle = void*;  // the vendor's communicator
using Stream = void*;  // the vendor's stream (cudaStream_t, aclrtStream, the double's)

// The calls whose failures a message names (call() gives the vendor's name for each).
enum class Call { AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, SendRecv, AllToAllv, Split };

class Library {
 public:
  virtual ~Library() = default;
  virtual const char* name() const = 0;       // "NCCL"
  virtual const char* errorCode() const = 0;  // its CommError code, e.g. ERR_SPMD_NCCL
  virtual Algo algo() const = 0;              // what Auto reports on it
  virtual const char* call(Call c) const = 0;
  // "<enum name> (<number>): <the library's text>", for result `r` (0 is success for every vendor).
  virtual std::string describe(int r) const = 0;

  // Each returns the vendor's result; the work completes on `s`. Reductions see F32/F64/I32/I64 only.
  virtual int allReduce(const void* in, void* out, size_t count, DType dt, RedOp op, Handle c, Stream s) = 0;
  virtual int reduceScatter(const void* in, void* out, size_t blockCount, DType dt, RedOp op, Handle c, Stream s) = 0;
  virtual int allGather(const void* in, void* out, size_t bytes, Handle c, Stream s) = 0;
  virtual int broadcast(void* data, size_t bytes, int root, Handle c, Stream s) = 0;  // in place
  virtual int reduce(const void* in, void* out, size_t count, DType dt, RedOp op, int root, Handle c, Stream s) = 0;
  // Every send and receive as one group (zero-byte entries are left out by the caller).
  virtual int exchange(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs, Handle c, Stream s) = 0;
  // all_to_allv as the vendor's one call (HcclAlltoAllV), where hasAllToAllv(); the others (NCCL) run it as
  // one exchange.
  virtual bool hasAllToAllv() const = 0;
  virtual int allToAllv(const void* in, void* out, const AllToAllvCounts& c, size_t esize, Handle h, Stream s) = 0;

  // "" where split() works, else why it cannot ("... lacks ncclCommSplit").
  virtual std::string splitMissing() const = 0;
  // The ranks of `c` that pass the same color as a communicator of their own, ranked by (key, rank in c):
  // collective over c's ranks, blocking until they all called.
  virtual int split(Handle c, int color, int key, Handle& child) = 0;

  // Optional in the vendor's library: false where it lacks the call.
  virtual bool asyncError(Handle c, int& result) = 0;
  virtual bool abort(Handle c) = 0;
  virtual void destroy(Handle c) = 0;
};

}  // namespace spmd::library
