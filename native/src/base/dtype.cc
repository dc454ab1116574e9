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

std::vector<std::string_view> dtypeNames() {
  std::vector<std::string_view> out;
  for (DType t : kDTypes) out.push_back(dtypeName(t));
  return out;
}

bool parseDType(std::string_view n, DType& out) {
  for (DType t : kDTypes) {
    if (dtypeName(t) == n) { out = t; return true; }
  }
  return false;
}

}  // namespace spmd
