#include "backends/mpi/mpi_api.h"

#include <climits>
#include <string>

#include "base/error.h"

namespace spmd::mpi {

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
  throw CommError(code::kSystem, std::string(call) + " failed: " + (len ? std::string(text, size_t(len)) : "error " + std::to_string(rc)));
}

MPI_Datatype reductionType(DType t) {
  switch (t) {
    case DType::F32: return MPI_FLOAT;
    case DType::F64: return MPI_DOUBLE;
    case DType::I32: return MPI_INT32_T;
    case DType::I64: return MPI_INT64_T;
    case DType::F16: case DType::BF16: break;
  }
  throw CommError(code::kInvalid, "mpi: " + std::string(dtypeName(t)) + " reaches a reduction unwidened");
}

MPI_Op reductionOp(RedOp op) {
  switch (op) {
    case RedOp::Sum: return MPI_SUM;
    case RedOp::Max: return MPI_MAX;
    case RedOp::Min: return MPI_MIN;
  }
  return MPI_OP_NULL;
}

int count(size_t n, const char* call) {
  if (n > size_t(INT_MAX)) {
    throw CommError(code::kUnsupported, std::string(call) + ": " + std::to_string(n) + " elements exceed MPI's int count");
  }
  return int(n);
}

MPI_Datatype elementType(size_t esize) {
  switch (esize) {
    case 8: return MPI_UINT64_T;
    case 4: return MPI_UINT32_T;
    case 2: return MPI_UINT16_T;
    default: return MPI_BYTE;
  }
}

Units units(size_t bytes, const char* call) {
  for (size_t unit : {size_t(8), size_t(4), size_t(2)}) {
    if (bytes % unit == 0) return {elementType(unit), count(bytes / unit, call)};
  }
  return {MPI_BYTE, count(bytes, call)};
}

}  // namespace spmd::mpi
