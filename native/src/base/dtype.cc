#include "base/dtype.h"

namespace spmd {

std::string_view dtypeName(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::F64: return "float64";
    case DType::I32: return "int32";
    case DType::I64: return "int64";
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
  }
  return "?";
}

bool parseDType(std::string_view n, DType& out) {
  for (DType t : {DType::F32, DType::F64, DType::I32, DType::I64, DType::F16, DType::BF16}) {
    if (dtypeName(t) == n) { out = t; return true; }
  }
  return false;
}

}  // namespace spmd
