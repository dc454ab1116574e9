// The small conversions every MPI file needs: return codes to CommError, job dtypes and reductions to MPI
// handles, sizes to MPI's int counts. (CMake defines OMPI_SKIP_MPICXX and MPICH_SKIP_MPICXX, so <mpi.h>
// brings no C++ bindings.)
#pragma once
#include <mpi.h>

#include <cstddef>

#include "base/dtype.h"

namespace spmd::mpi {

// Throws CommError(kSystem) naming `call` and MPI's own text for `rc` unless rc is MPI_SUCCESS.
void check(int rc, const char* call);

// Reductions only ever see these four (TypedOps widens float16/bfloat16 first).
MPI_Datatype reductionType(DType t);
MPI_Op reductionOp(RedOp op);

// An MPI int count, or CommError(kUnsupported) naming `call` when `n` does not fit.
int count(size_t n, const char* call);

// A payload of `bytes` as (type, count) in the widest of 8/4/2/1-byte units that divides it, so a
// byte-counted op reaches 8x further before MPI's int count overflows. Ranks passing equal sizes agree.
struct Units {
  MPI_Datatype type;
  int count;
};
Units units(size_t bytes, const char* call);

// The MPI type moving elements of `esize` bytes unchanged (1, 2, 4 or 8).
MPI_Datatype elementType(size_t esize);

}  // namespace spmd::mpi
