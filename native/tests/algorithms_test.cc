// Multi-rank tests of every algorithm in algorithms/collectives.h, run over the threaded transport double,
// plus the reduction kernels. Each case compares every element on every rank with a plain reference.
// Prints failures as they happen and a final "N passed, N failed"; exits non-zero on any failure. An
// argument limits the multi-rank cases to those whose name contains it, e.g. "scatterTree W=5".
#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/collectives.h"
#include "algorithms/group_transport.h"
#include "base/error.h"
#include "base/partition.h"
#include "kernels/cpu/reduce.h"
#include "thread_transport_double.h"

namespace {

using namespace spmd;
using Bytes = std::vector<unsigned char>;

// ---------------------------------------------------------------------------------------------- bookkeeping

int passed = 0;
int failed = 0;
std::string caseFilter;  // argv[1]: run only the multi-rank cases whose name contains it

void check(bool ok, const std::string& what) {
  if (ok) {
    ++passed;
    return;
  }
  ++failed;
  if (failed <= 50) std::printf("FAIL %s\n", what.c_str());
  if (failed == 50) std::printf("(further failures counted, not printed)\n");
}

const int kWorlds[] = {1, 2, 3, 4, 5, 8};
const size_t kCounts[] = {0, 1, 7, 1000};
constexpr size_t kLargeCount = 100003;
const DType kTypes[] = {DType::F32, DType::F64, DType::I32, DType::I64};
const RedOp kOps[] = {RedOp::Sum, RedOp::Max, RedOp::Min};

const char* opName(RedOp op) { return op == RedOp::Sum ? "sum" : op == RedOp::Max ? "max" : "min"; }

// Tiny channels shake out deadlocks; the large count gets roomier ones so the suite stays quick, and its
// blocks still exceed the capacity many times over.
size_t capacityFor(size_t bytes) { return bytes > 64 * 1024 ? 4096 : 64; }

void* ptr(Bytes& b) { return b.empty() ? nullptr : b.data(); }

int wrap(long long x, int W) { return int(((x % W) + W) % W); }

// Runs body on W ranks and records one check: no rank failed, no bytes were left in flight, and verify(r)
// returned "" for every rank.
void runCase(const std::string& name, int W, size_t capacity, const std::function<void(Transport&)>& body,
             const std::function<std::string(int)>& verify) {
  if (name.find(caseFilter) == std::string::npos) return;
  std::string problem;
  for (const std::string& e : testing::runRanksOnThreads(W, capacity, body)) {
    problem += (problem.empty() ? "" : "; ") + e;
  }
  for (int r = 0; r < W && problem.empty(); ++r) {
    std::string bad = verify(r);
    if (!bad.empty()) problem = "rank " + std::to_string(r) + ": " + bad;
  }
  check(problem.empty(), name + ": " + problem);
}

// ---------------------------------------------------------------------------------------------- typed data

template <class F>
void withType(DType dt, F&& f) {
  switch (dt) {
    case DType::F32: return f(float{});
    case DType::F64: return f(double{});
    case DType::I32: return f(int32_t{});
    case DType::I64: return f(int64_t{});
    default: throw std::logic_error("test: no reductions on half types");
  }
}

void put(DType dt, void* base, size_t i, double v) {
  withType(dt, [&](auto zero) {
    using T = decltype(zero);
    static_cast<T*>(base)[i] = T(v);
  });
}

double at(DType dt, const void* base, size_t i) {
  double v = 0;
  withType(dt, [&](auto zero) { v = double(static_cast<const decltype(zero)*>(base)[i]); });
  return v;
}

// Integer-valued and small, so every reduction order gives the exact same answer in every type.
int64_t pattern(int r, size_t i) { return int64_t((size_t(r) * 31 + i * 7) % 17) - 8; }

double reference(RedOp op, int W, size_t i) {
  int64_t acc = pattern(0, i);
  for (int r = 1; r < W; ++r) {
    const int64_t v = pattern(r, i);
    acc = op == RedOp::Sum ? acc + v : op == RedOp::Max ? std::max(acc, v) : std::min(acc, v);
  }
  return double(acc);
}

Bytes typedInput(DType dt, int r, size_t count) {
  Bytes b(count * elementSize(dt));
  for (size_t i = 0; i < count; ++i) put(dt, b.data(), i, double(pattern(r, i)));
  return b;
}

// "" when got[k] == want(k) for k < n, else the first difference.
std::string mismatch(DType dt, const Bytes& got, size_t n, const std::function<double(size_t)>& want) {
  if (got.size() != n * elementSize(dt)) return "output has " + std::to_string(got.size()) + " bytes";
  for (size_t k = 0; k < n; ++k) {
    const double g = at(dt, got.data(), k), w = want(k);
    if (g != w) return "element " + std::to_string(k) + ": got " + std::to_string(g) + ", want " + std::to_string(w);
  }
  return "";
}

unsigned char bytePattern(int r, size_t i) { return static_cast<unsigned char>(r * 131 + i * 7 + 3); }

Bytes byteInput(int r, size_t n) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = bytePattern(r, i);
  return b;
}

std::string byteMismatch(const Bytes& got, size_t n, const std::function<unsigned char(size_t)>& want) {
  if (got.size() != n) return "output has " + std::to_string(got.size()) + " bytes, want " + std::to_string(n);
  for (size_t k = 0; k < n; ++k) {
    if (got[k] != want(k)) {
      return "byte " + std::to_string(k) + ": got " + std::to_string(got[k]) + ", want " + std::to_string(want(k));
    }
  }
  return "";
}

constexpr unsigned char kPoison = 0xA5;

// ---------------------------------------------------------------------------------------------- reductions

enum class Lands { Everywhere, OwnBlock, AtRoot };

using ReductionFn = void (*)(Transport&, Workspace&, const void*, void*, size_t, DType, RedOp, int);

struct Reduction {
  const char* name;
  Lands lands;
  ReductionFn run;
};

// The hierarchical allreduce on the nodes nodeOf(r, W) makes of the ranks; where they are not two even levels,
// on one node of every rank (the algorithm's degenerate form, which must be right too).
void hierarchical(int (*nodeOf)(int r, int W), Transport& t, Workspace& ws, const void* in, void* out, size_t n,
                  DType dt, RedOp op, size_t sliceBytes) {
  std::vector<int> nodes, everyone;
  for (int r = 0; r < t.size(); ++r) {
    nodes.push_back(nodeOf(r, t.size()));
    everyone.push_back(r);
  }
  const NodeGroups g = nodeGroups(nodes, t.rank()).value_or(NodeGroups{everyone, {t.rank()}});
  algo::allreduceHierarchical(t, ws, g, in, out, n, dt, op, sliceBytes);
}

const Reduction kReductions[] = {
    {"allreduceRing", Lands::Everywhere,
     [](Transport& t, Workspace& ws, const void* in, void* out, size_t n, DType dt, RedOp op, int) {
       algo::allreduceRing(t, ws, in, out, n, dt, op);
     }},
    // Slices of a few elements: many per block, uneven and empty ones, every step of the wavefront at once.
    {"allreduceRing sliced", Lands::Everywhere,
     [](Transport& t, Workspace& ws, const void* in, void* out, size_t n, DType dt, RedOp op, int) {
       algo::allreduceRing(t, ws, in, out, n, dt, op, 3 * elementSize(dt));
     }},
    {"allreduceTree", Lands::Everywhere,
     [](Transport& t, Workspace& ws, const void* in, void* out, size_t n, DType dt, RedOp op, int) {
       algo::allreduceTree(t, ws, in, out, n, dt, op);
     }},
    {"allreduceDirect", Lands::Everywhere,
     [](Transport& t, Workspace& ws, const void* in, void* out, size_t n, DType dt, RedOp op, int) {
       algo::allreduceDirect(t, ws, in, out, n, dt, op);
     }},
    // W = 4: 2 nodes of 2, W = 8: 4 nodes of 2 (consecutive ranks share a node); whole 1 MiB slices.
    {"allreduceHierarchical pairs", Lands::Everywhere,
     [](Transport& t, Workspace& ws, const void* in, void* out, size_t n, DType dt, RedOp op, int) {
       hierarchical([](int r, int W) { return W % 2 ? 0 : r / 2; }, t, ws, in, out, n, dt, op, algo::kRingSliceBytes);
     }},
    // W = 4, 8: 2 nodes of 2 or 4, ranks alternating between them (mpirun --map-by node); node blocks of 5
    // elements, so many pieces are in flight at once and the last ones are short or empty.
    {"allreduceHierarchical alternating sliced", Lands::Everywhere,
     [](Transport& t, Workspace& ws, const void* in, void* out, size_t n, DType dt, RedOp op, int) {
       hierarchical([](int r, int W) { return W % 2 ? 0 : r % 2; }, t, ws, in, out, n, dt, op, 5 * elementSize(dt));
     }},
    // One piece: the whole array at once.
    {"allreduceHierarchical pairs whole", Lands::Everywhere,
     [](Transport& t, Workspace& ws, const void* in, void* out, size_t n, DType dt, RedOp op, int) {
       hierarchical([](int r, int W) { return W % 2 ? 0 : r / 2; }, t, ws, in, out, n, dt, op, 0);
     }},
    {"reduceScatterRing", Lands::OwnBlock,
     [](Transport& t, Workspace& ws, const void* in, void* out, size_t n, DType dt, RedOp op, int) {
       algo::reduceScatterRing(t, ws, in, out, n, dt, op);
     }},
    {"reduceScatterDirect", Lands::OwnBlock,
     [](Transport& t, Workspace& ws, const void* in, void* out, size_t n, DType dt, RedOp op, int) {
       algo::reduceScatterDirect(t, ws, in, out, n, dt, op);
     }},
    {"reduceTree", Lands::AtRoot,
     [](Transport& t, Workspace& ws, const void* in, void* out, size_t n, DType dt, RedOp op, int root) {
       algo::reduceTree(t, ws, in, out, n, dt, op, root);
     }},
    {"reduceDirect", Lands::AtRoot,
     [](Transport& t, Workspace& ws, const void* in, void* out, size_t n, DType dt, RedOp op, int root) {
       algo::reduceDirect(t, ws, in, out, n, dt, op, root);
     }},
};

// Elements of the result rank r holds.
size_t resultCount(Lands lands, const Partition& p, int r, int root) {
  switch (lands) {
    case Lands::Everywhere: return p.total;
    case Lands::OwnBlock: return p.count(r);
    case Lands::AtRoot: return r == root ? p.total : 0;
  }
  return 0;
}

std::string rootTag(const Reduction& a, int root) {
  return a.lands == Lands::AtRoot ? " root=" + std::to_string(root) : "";
}

// Each rank runs the collective twice on one Workspace, so a result that depends on stale scratch shows.
// inPlace passes in == out wherever the contract allows it (allreduce everywhere, reduce on the root).
void testReduction(const Reduction& a, int W, size_t count, DType dt, RedOp op, int root, bool inPlace) {
  const Partition p{count, W};
  const size_t es = elementSize(dt);
  std::vector<Bytes> in(static_cast<size_t>(W)), out(static_cast<size_t>(W));
  for (int r = 0; r < W; ++r) {
    in[size_t(r)] = typedInput(dt, r, count);
    out[size_t(r)].resize(resultCount(a.lands, p, r, root) * es);
  }
  auto body = [&](Transport& t) {
    const int r = t.rank();
    Bytes& o = out[size_t(r)];
    const bool alias = inPlace && (a.lands == Lands::Everywhere || r == root);
    Workspace ws;
    for (int rep = 0; rep < 2; ++rep) {
      if (alias) {
        std::copy(in[size_t(r)].begin(), in[size_t(r)].end(), o.begin());
      } else {
        std::fill(o.begin(), o.end(), kPoison);
      }
      a.run(t, ws, alias ? ptr(o) : ptr(in[size_t(r)]), ptr(o), count, dt, op, root);
    }
  };
  auto verify = [&](int r) -> std::string {
    const Bytes& o = out[size_t(r)];
    switch (a.lands) {
      case Lands::Everywhere: return mismatch(dt, o, count, [&](size_t i) { return reference(op, W, i); });
      case Lands::OwnBlock:
        return mismatch(dt, o, p.count(r), [&](size_t k) { return reference(op, W, p.offset(r) + k); });
      case Lands::AtRoot:
        return r == root ? mismatch(dt, o, count, [&](size_t i) { return reference(op, W, i); }) : "";
    }
    return "";
  };
  runCase(std::string(a.name) + " W=" + std::to_string(W) + " count=" + std::to_string(count) + " " +
              std::string(dtypeName(dt)) + " " + opName(op) + rootTag(a, root) + (inPlace ? " in-place" : ""),
          W, capacityFor(count * es), body, verify);
}

void testReductions() {
  for (const Reduction& a : kReductions) {
    const bool inPlaceAllowed = a.lands != Lands::OwnBlock;
    for (int W : kWorlds) {
      const int roots = a.lands == Lands::AtRoot ? W : 1;
      for (size_t count : kCounts) {
        for (DType dt : kTypes) {
          for (RedOp op : kOps) {
            for (int root = 0; root < roots; ++root) {
              testReduction(a, W, count, dt, op, root, false);
              if (inPlaceAllowed) testReduction(a, W, count, dt, op, root, true);
            }
          }
        }
      }
      // One large count per algorithm, float and integer, first and last root.
      for (int root : {0, roots - 1}) {
        testReduction(a, W, kLargeCount, DType::F32, RedOp::Sum, root, inPlaceAllowed);
        testReduction(a, W, kLargeCount, DType::I64, RedOp::Max, root, false);
        if (roots == 1) break;
      }
    }
  }
}

// Random (non-integer) floats: the direct reductions must equal the left-to-right fold in rank order bit for
// bit, whichever rank folds and whether or not it runs in place; every allreduce must leave identical
// bytes on every rank.
template <class T>
void testFloatDeterminism(int W, size_t count) {
  const DType dt = sizeof(T) == 4 ? DType::F32 : DType::F64;
  const Partition p{count, W};
  std::vector<std::vector<T>> x(static_cast<size_t>(W), std::vector<T>(count));
  uint64_t state = 0x9E3779B97F4A7C15ull * uint64_t(W) + count;
  for (auto& v : x) {
    for (T& e : v) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      e = T(double(state >> 11) / double(1ull << 53) * 2.0 - 1.0);
    }
  }
  std::vector<T> fold = x[0];
  for (int r = 1; r < W; ++r) {
    for (size_t i = 0; i < count; ++i) fold[i] = fold[i] + x[size_t(r)][i];
  }
  const std::string tag =
      " W=" + std::to_string(W) + " count=" + std::to_string(count) + " " + std::string(dtypeName(dt));

  for (const Reduction& a : kReductions) {
    const bool rankOrder = std::string(a.name).find("Direct") != std::string::npos;
    const int roots = a.lands == Lands::AtRoot ? W : 1;
    for (int root = 0; root < roots; ++root) {
      for (bool inPlace : {false, true}) {
        if (inPlace && a.lands == Lands::OwnBlock) continue;
        std::vector<std::vector<T>> out(static_cast<size_t>(W));
        auto body = [&](Transport& t) {
          const int r = t.rank();
          const bool alias = inPlace && (a.lands == Lands::Everywhere || r == root);
          const size_t n = resultCount(a.lands, p, r, root);
          std::vector<T>& o = out[size_t(r)];
          o.assign(n, T(0));
          if (alias) o = x[size_t(r)];
          Workspace ws;
          a.run(t, ws, alias ? o.data() : x[size_t(r)].data(), n ? o.data() : nullptr, count, dt, RedOp::Sum, root);
        };
        auto verify = [&](int r) -> std::string {
          const std::vector<T>& o = out[size_t(r)];
          if (a.lands == Lands::Everywhere && std::memcmp(o.data(), out[0].data(), count * sizeof(T)) != 0) {
            return "bytes differ from rank 0's";
          }
          if (a.lands == Lands::AtRoot && r != root) return "";
          const size_t first = a.lands == Lands::OwnBlock ? p.offset(r) : 0;
          for (size_t k = 0; k < o.size(); ++k) {
            const T want = fold[first + k];
            const bool ok = rankOrder ? std::memcmp(&o[k], &want, sizeof(T)) == 0
                                      : std::abs(double(o[k]) - double(want)) <= 1e-5 * W;
            if (!ok) {
              return "element " + std::to_string(first + k) + ": got " + std::to_string(o[k]) + ", want " +
                     std::to_string(want);
            }
          }
          return "";
        };
        runCase(std::string(a.name) + " determinism" + tag + rootTag(a, root) + (inPlace ? " in-place" : ""),
                W, 64, body, verify);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------- data movement

template <class F>
void forEachSize(F&& f) {
  for (int W : kWorlds) {
    for (size_t count : kCounts) {
      for (size_t esize : {size_t(1), size_t(8)}) f(W, count, esize);
    }
    f(W, kLargeCount, size_t(1));
  }
}

// Expected bytes of a rank-major concatenation of every rank's byteInput(r, n).
std::function<unsigned char(size_t)> rankMajor(size_t n) {
  return [n](size_t k) { return bytePattern(int(k / n), k % n); };
}

std::string sizeTag(int W, size_t count, size_t esize) {
  return " W=" + std::to_string(W) + " count=" + std::to_string(count) + " esize=" + std::to_string(esize);
}

void testAllGather() {
  using Fn = void (*)(Transport&, const void*, void*, size_t);
  const std::pair<const char*, Fn> algos[] = {{"allGatherRing", algo::allGatherRing},
                                              {"allGatherDirect", algo::allGatherDirect}};
  for (auto [name, fn] : algos) {
    forEachSize([&, name = name, fn = fn](int W, size_t count, size_t esize) {
      const size_t n = count * esize;
      std::vector<Bytes> in(static_cast<size_t>(W)), out(size_t(W), Bytes(size_t(W) * n, kPoison));
      for (int r = 0; r < W; ++r) in[size_t(r)] = byteInput(r, n);
      runCase(
          name + sizeTag(W, count, esize), W, capacityFor(n),
          [&](Transport& t) { fn(t, ptr(in[size_t(t.rank())]), ptr(out[size_t(t.rank())]), n); },
          [&](int r) { return byteMismatch(out[size_t(r)], size_t(W) * n, rankMajor(n)); });
    });
  }
}

void testGather() {
  using Fn = void (*)(Transport&, Workspace&, const void*, void*, size_t, int);
  const std::pair<const char*, Fn> algos[] = {
      {"gatherDirect", [](Transport& t, Workspace&, const void* in, void* out, size_t n, int root) {
         algo::gatherDirect(t, in, out, n, root);
       }},
      {"gatherTree", [](Transport& t, Workspace& ws, const void* in, void* out, size_t n, int root) {
         algo::gatherTree(t, ws, in, out, n, root);
       }},
  };
  for (const auto& [name, fn] : algos) {
    forEachSize([&, name = name](int W, size_t count, size_t esize) {
      const size_t n = count * esize;
      for (int root = 0; root < W; ++root) {
        std::vector<Bytes> in(static_cast<size_t>(W)), out(static_cast<size_t>(W));
        for (int r = 0; r < W; ++r) in[size_t(r)] = byteInput(r, n);
        out[size_t(root)].assign(size_t(W) * n, kPoison);
        runCase(
            name + sizeTag(W, count, esize) + " root=" + std::to_string(root), W, capacityFor(n),
            [&](Transport& t) {
              Workspace ws;
              fn(t, ws, ptr(in[size_t(t.rank())]), ptr(out[size_t(t.rank())]), n, root);
            },
            [&](int r) {
              if (r != root) return std::string();
              return byteMismatch(out[size_t(r)], size_t(W) * n, rankMajor(n));
            });
      }
    });
  }
}

void testBroadcast() {
  using Fn = void (*)(Transport&, void*, size_t, int);
  const std::pair<const char*, Fn> algos[] = {{"broadcastTree", algo::broadcastTree},
                                              {"broadcastDirect", algo::broadcastDirect}};
  for (auto [name, fn] : algos) {
    forEachSize([&, name = name, fn = fn](int W, size_t count, size_t esize) {
      const size_t n = count * esize;
      for (int root = 0; root < W; ++root) {
        std::vector<Bytes> data(size_t(W), Bytes(n, kPoison));
        data[size_t(root)] = byteInput(root, n);
        runCase(
            name + sizeTag(W, count, esize) + " root=" + std::to_string(root), W, capacityFor(n),
            [&](Transport& t) { fn(t, ptr(data[size_t(t.rank())]), n, root); },
            [&](int r) { return byteMismatch(data[size_t(r)], n, [&](size_t k) { return bytePattern(root, k); }); });
      }
    });
  }
}

void testScatter() {
  using Fn = void (*)(Transport&, Workspace&, const void*, void*, size_t, size_t, int);
  const std::pair<const char*, Fn> algos[] = {
      {"scatterDirect", [](Transport& t, Workspace&, const void* in, void* out, size_t c, size_t e, int root) {
         algo::scatterDirect(t, in, out, c, e, root);
       }},
      {"scatterTree", [](Transport& t, Workspace& ws, const void* in, void* out, size_t c, size_t e, int root) {
         algo::scatterTree(t, ws, in, out, c, e, root);
       }},
  };
  for (const auto& [name, fn] : algos) {
    forEachSize([&, name = name](int W, size_t count, size_t esize) {
      const Partition p{count, W};
      for (int root = 0; root < W; ++root) {
        const Bytes whole = byteInput(root + 100, count * esize);
        std::vector<Bytes> out(static_cast<size_t>(W));
        for (int r = 0; r < W; ++r) out[size_t(r)].assign(p.count(r) * esize, kPoison);
        runCase(
            name + sizeTag(W, count, esize) + " root=" + std::to_string(root), W, capacityFor(count * esize),
            [&](Transport& t) {
              Workspace ws;
              const int r = t.rank();
              fn(t, ws, r == root && !whole.empty() ? whole.data() : nullptr, ptr(out[size_t(r)]), count, esize, root);
            },
            [&](int r) {
              return byteMismatch(out[size_t(r)], p.count(r) * esize,
                                  [&](size_t k) { return whole[p.offset(r) * esize + k]; });
            });
      }
    });
  }
}

void testAllToAll() {
  forEachSize([&](int W, size_t count, size_t esize) {
    const Partition p{count, W};
    std::vector<Bytes> in(static_cast<size_t>(W)), out(static_cast<size_t>(W));
    for (int r = 0; r < W; ++r) {
      in[size_t(r)] = byteInput(r, count * esize);
      out[size_t(r)].assign(size_t(W) * p.count(r) * esize, kPoison);
    }
    runCase(
        "allToAllDirect" + sizeTag(W, count, esize), W, capacityFor(count * esize),
        [&](Transport& t) {
          const size_t r = size_t(t.rank());
          algo::allToAllDirect(t, ptr(in[r]), ptr(out[r]), count, esize);
        },
        [&](int r) {
          const size_t mine = p.count(r) * esize;
          return byteMismatch(out[size_t(r)], size_t(W) * mine, [&](size_t k) {
            return bytePattern(int(k / mine), p.offset(r) * esize + k % mine);
          });
        });
  });
}

// Uneven, rank-dependent blocks from `count` per rank: zeros on and off the diagonal, rank 1 sending none.
std::vector<size_t> vMatrix(int W, size_t count) {
  std::vector<size_t> m;
  for (int i = 0; i < W; ++i) {
    for (int j = 0; j < W; ++j) m.push_back(i == 1 ? 0 : count * size_t((i * 5 + j * 3 + 1) % 4) / 4 / size_t(W) + size_t(i == j));
  }
  return m;
}

void testAllToAllv() {
  forEachSize([&](int W, size_t count, size_t esize) {
    const std::vector<size_t> m = vMatrix(W, count);
    std::vector<AllToAllvCounts> c;
    std::vector<Bytes> in(static_cast<size_t>(W)), out(static_cast<size_t>(W));
    for (int r = 0; r < W; ++r) {
      c.push_back(AllToAllvCounts::of(m, W, r));
      in[size_t(r)] = byteInput(r, c.back().sent() * esize);
      out[size_t(r)].assign(c.back().received() * esize, kPoison);
    }
    runCase(
        "allToAllvDirect" + sizeTag(W, count, esize), W, capacityFor(count * esize),
        [&](Transport& t) {
          const size_t r = size_t(t.rank());
          algo::allToAllvDirect(t, ptr(in[r]), ptr(out[r]), c[r], esize);
        },
        [&](int r) {
          // Byte k of the output: from the rank whose block holds it, at that rank's offset for this one.
          const AllToAllvCounts& mine = c[size_t(r)];
          return byteMismatch(out[size_t(r)], mine.received() * esize, [&](size_t k) {
            int from = W - 1;
            while (mine.recvOffsets[size_t(from)] * esize > k || mine.recvCounts[size_t(from)] == 0) --from;
            const size_t at = c[size_t(from)].sendOffsets[size_t(r)] * esize;
            return bytePattern(from, at + k - mine.recvOffsets[size_t(from)] * esize);
          });
        });
  });
}

void testSendRecvShift() {
  forEachSize([&](int W, size_t count, size_t esize) {
    const size_t n = count * esize;
    for (int shift : {0, 1, -1, 2, -3, W, W + 1, -2 * W - 1, INT_MAX, INT_MIN}) {
      std::vector<Bytes> in(static_cast<size_t>(W)), out(size_t(W), Bytes(n, kPoison));
      for (int r = 0; r < W; ++r) in[size_t(r)] = byteInput(r, n);
      runCase(
          "sendRecvShift" + sizeTag(W, count, esize) + " shift=" + std::to_string(shift), W, capacityFor(n),
          [&](Transport& t) {
            const size_t r = size_t(t.rank());
            algo::sendRecvShift(t, ptr(in[r]), ptr(out[r]), n, shift);
          },
          [&](int r) {
            const int from = wrap((long long)r - shift, W);
            return byteMismatch(out[size_t(r)], n, [&](size_t k) { return bytePattern(from, k); });
          });
    }
  });
}

// No rank may leave barrier k before every rank has entered it; staggered arrivals make an early exit show.
void testBarrier() {
  constexpr int kRounds = 4;
  for (int W : kWorlds) {
    std::vector<std::atomic<int>> entered(kRounds);
    std::atomic<int> early{0};
    runCase(
        "barrierDissemination W=" + std::to_string(W), W, 64,
        [&](Transport& t) {
          for (int k = 0; k < kRounds; ++k) {
            std::this_thread::sleep_for(std::chrono::microseconds(((t.rank() * 7 + k * 3) % 5) * 300));
            entered[size_t(k)].fetch_add(1);
            algo::barrierDissemination(t);
            if (entered[size_t(k)].load() != W) early.fetch_add(1);
          }
        },
        [&](int) { return early.load() ? std::to_string(early.load()) + " early exits" : std::string(); });
  }
}

// ---------------------------------------------------------------------------------------------- kernels

template <class T>
T scalarOp(RedOp op, T a, T b) {
  if (op == RedOp::Max) return std::max(a, b);
  if (op == RedOp::Min) return std::min(a, b);
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return T(U(a) + U(b));
  } else {
    return a + b;
  }
}

void testKernels() {
  for (DType dt : kTypes) {
    withType(dt, [&](auto zero) {
      using T = decltype(zero);
      for (RedOp op : kOps) {
        for (size_t n : {0, 1, 2, 3, 5, 8, 15, 16, 17, 31, 33, 64, 67}) {
          std::vector<T> a(n), b(n), want(n);
          for (size_t i = 0; i < n; ++i) {
            a[i] = T(double(pattern(3, i)) * 1.5);
            b[i] = T(double(pattern(5, i * 3)) * 1.25);
            want[i] = scalarOp(op, a[i], b[i]);
          }
          const std::string tag = std::string(dtypeName(dt)) + " " + opName(op) + " n=" + std::to_string(n);
          std::vector<T> d = a;
          kernels::reduceInto(dt, op, d.data(), b.data(), n);
          check(d == want, "reduceInto " + tag);
          std::vector<T> d3(n);
          kernels::reduce3(dt, op, d3.data(), a.data(), b.data(), n);
          check(d3 == want, "reduce3 " + tag);
          std::vector<T> da = a;
          kernels::reduce3(dt, op, da.data(), da.data(), b.data(), n);
          check(da == want, "reduce3 dst==a " + tag);
          std::vector<T> db = b;
          kernels::reduce3(dt, op, db.data(), a.data(), db.data(), n);
          check(db == want, "reduce3 dst==b " + tag);
        }
      }
    });
  }
  int32_t i32[2] = {INT32_MAX, INT32_MIN};
  const int32_t one32[2] = {1, -1};
  kernels::reduceInto(DType::I32, RedOp::Sum, i32, one32, 2);
  check(i32[0] == INT32_MIN && i32[1] == INT32_MAX, "int32 sum wraps");
  int64_t i64[2] = {INT64_MAX, INT64_MIN};
  const int64_t one64[2] = {1, -1};
  kernels::reduceInto(DType::I64, RedOp::Sum, i64, one64, 2);
  check(i64[0] == INT64_MIN && i64[1] == INT64_MAX, "int64 sum wraps");

  for (DType half : {DType::F16, DType::BF16}) {
    uint16_t x[4] = {}, y[4] = {};
    auto rejects = [&](const std::function<void()>& f) {
      try {
        f();
      } catch (const CommError& e) {
        return std::strcmp(e.code(), code::kInvalid) == 0;
      }
      return false;
    };
    const std::string name(dtypeName(half));
    check(rejects([&] { kernels::reduceInto(half, RedOp::Sum, x, y, 4); }), "reduceInto rejects " + name);
    check(rejects([&] { kernels::reduce3(half, RedOp::Max, x, x, y, 4); }), "reduce3 rejects " + name);
  }
}

// ---------------------------------------------------------------------------------------------- the double

// The double must turn a deadlock into a timeout naming the peer: both ranks send more than a channel holds
// before receiving.
void testDoubleReportsDeadlock() {
  auto errors = testing::runRanksOnThreads(
      2, 64,
      [](Transport& t) {
        Bytes out(1000, 1), in(1000);
        t.send(1 - t.rank(), out.data(), out.size());
        t.recv(1 - t.rank(), in.data(), in.size());
      },
      std::chrono::milliseconds(200));
  bool named = false;
  for (const std::string& e : errors) {
    named |= e.find(code::kTimeout) != std::string::npos && e.find("waiting for rank") != std::string::npos;
  }
  check(named, "thread transport double reports a deadlock as a timeout naming the peer");
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a crash mid-suite still shows the failures before it
  if (argc > 1) caseFilter = argv[1];
  const auto start = std::chrono::steady_clock::now();
  testKernels();
  testDoubleReportsDeadlock();
  testReductions();
  for (int W : {2, 3, 5, 8}) {
    for (size_t count : {size_t(7), size_t(1000)}) {
      testFloatDeterminism<float>(W, count);
      testFloatDeterminism<double>(W, count);
    }
  }
  testAllGather();
  testGather();
  testBroadcast();
  testScatter();
  testAllToAll();
  testAllToAllv();
  testSendRecvShift();
  testBarrier();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%d passed, %d failed (%.1f s)\n", passed, failed, secs);
  return failed == 0 ? 0 : 1;
}
