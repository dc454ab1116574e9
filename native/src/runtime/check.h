// Verifies an op's output element by element against values regenerated from (fill seed, rank): data
// movement must be bit-exact; reductions must be exact for integers and within a rounding bound for
// floats (the bound nccl-tests-style checks need, since ring and tree sum in different orders).
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/program.h"

namespace spmd {

struct CheckResult {
  uint64_t wrong = 0;
  uint64_t checked = 0;
  std::vector<Mismatch> mismatches;  // the first kMaxMismatches wrong elements
};

// In a group, `rank` and `worldSize` are the group's and `members` its ranks' lane ranks (whose fills the
// inputs are); empty: the whole lane.
CheckResult checkOutput(const Program& program, const OpSpec& op, int rank, int worldSize,
                        const HostBytes& output, const std::vector<int>& members = {});

}  // namespace spmd
