// The shm backend's shared algorithms on a real segment, ranks as threads: every element of every op at
// world sizes 1, 2, 3 and 5, at lengths of 0, 1, not divisible by W, and spanning many chunks (slots of 4
// KiB and 2 of them, so chunks rotate through reused slots within and across ops), in place and not, and
// outputs large enough to be streamed past the cache. Then
// the failures: a rank that never arrives ends the others' waits at the deadline, naming it; and asking for
// "shared" where no segment exists is refused. And the channels under them: several messages to one peer in one
// exchange keep their order, staged and handed off single-copy; the start-up timing that says from which
// sizes blocks move single-copy; and the host buffers those blocks are pulled from, on huge pages from 2 MiB.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backends/shm/core_probe.h"
#include "backends/shm/crossover.h"
#include "backends/shm/segment.h"
#include "backends/shm/shared_collectives.h"
#include "backends/shm/single_copy.h"
#include "backends/shm/shm_transport.h"
#include "base/cores.h"
#include "base/error.h"
#include "base/host_bytes.h"
#include "base/partition.h"
#include "harness.h"

namespace {

using namespace spmd;
using spmd::testing::check;
using Clock = std::chrono::steady_clock;

// Small integers: sums of a few ranks are exact in every type, so any fold order gives the same bits.
template <typename T>
T value(int rank, size_t i) { return T(int((size_t(rank) * 131 + i * 7) % 19) - 9); }

// Runs body(rank, segment, transport) on W threads over one fresh segment; returns each rank's error ("" if none).
std::vector<std::string> onTransports(int W, shm::Layout layout,
                                      const std::function<void(int, shm::Segment&, shm::ShmTransport&)>& body) {
  layout.worldSize = W;
  const std::string name = "/spmd-shared-test-" + std::to_string(getpid());
  shm::Segment seg = shm::Segment::create(name, layout);
  seg.unlink();
  std::vector<std::string> errors(static_cast<size_t>(W));
  std::vector<std::thread> threads;
  for (int r = 0; r < W; ++r) {
    threads.emplace_back([&, r] {
      shm::ShmTransport t(seg, r, 0);
      try {
        body(r, seg, t);
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

// Runs body(rank, collectives) on W threads over one fresh segment; returns each rank's error ("" if none).
std::vector<std::string> onSegment(int W, shm::Layout layout, double deadlineSec,
                                   const std::function<void(int, Collectives&)>& body, size_t streamAbove = 0) {
  return onTransports(W, layout, [&](int r, shm::Segment& seg, shm::ShmTransport& t) {
    shm::SharedCollectives c(seg, t, 0, [&t](const std::string& why) { t.abort(why); }, streamAbove);
    c.setDeadline(Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(deadlineSec)));
    body(r, c);
  });
}

template <typename T>
std::vector<T> inputOf(int rank, size_t n) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = value<T>(rank, i);
  return v;
}

template <typename T>
T reduced(RedOp op, int W, size_t i) {
  T acc = value<T>(0, i);
  for (int r = 1; r < W; ++r) {
    T x = value<T>(r, i);
    acc = op == RedOp::Sum ? T(acc + x) : op == RedOp::Max ? std::max(acc, x) : std::min(acc, x);
  }
  return acc;
}

// `singleCopy`: every op that has a single-copy path takes it at every size, as the start-up's timing may have
// it do from 16 KiB, and a caller may force (here down to zero bytes).
template <typename T>
void exactOps(int W, const shm::Layout& layout, DType dt, RedOp op, size_t n, const std::string& tag, size_t streamAbove = 0, bool singleCopy = false) {
  const Partition p{n, W};
  std::vector<std::vector<std::string>> wrong(static_cast<size_t>(W));
  auto note = [&](int r, const std::string& what) { wrong[size_t(r)].push_back(what); };
  auto errors = onSegment(W, layout, 20, [&](int r, Collectives& c) {
    if (singleCopy) static_cast<shm::SharedCollectives&>(c).useSingleCopy({0, 0, "", 0});
    const std::vector<T> in = inputOf<T>(r, n);
    // allreduce, out of place and in place
    std::vector<T> out(n, T(-77));
    c.allreduce(in.data(), out.data(), n, dt, op, Algo::Shared);
    for (size_t i = 0; i < n; ++i) if (out[i] != reduced<T>(op, W, i)) { note(r, "allreduce[" + std::to_string(i) + "]"); break; }
    std::vector<T> io = in;
    c.allreduce(io.data(), io.data(), n, dt, op, Algo::Auto);
    for (size_t i = 0; i < n; ++i) if (io[i] != reduced<T>(op, W, i)) { note(r, "allreduce in place[" + std::to_string(i) + "]"); break; }
    // reduce_scatter, out of place and into its own block of the input
    std::vector<T> block(p.count(r) + 1, T(-77));
    c.reduceScatter(in.data(), block.data(), n, dt, op, Algo::Shared);
    for (size_t i = 0; i < p.count(r); ++i) if (block[i] != reduced<T>(op, W, p.offset(r) + i)) { note(r, "reduce_scatter[" + std::to_string(i) + "]"); break; }
    if (block[p.count(r)] != T(-77)) note(r, "reduce_scatter wrote past its block");
    io = in;
    c.reduceScatter(io.data(), io.data() + p.offset(r), n, dt, op, Algo::Shared);
    for (size_t i = 0; i < p.count(r); ++i) if (io[p.offset(r) + i] != reduced<T>(op, W, p.offset(r) + i)) { note(r, "reduce_scatter in place[" + std::to_string(i) + "]"); break; }
    // all_gather, gather to every root, broadcast from every root
    std::vector<T> all(size_t(W) * n, T(-77));
    c.allGather(in.data(), all.data(), n * sizeof(T), Algo::Shared);
    for (int j = 0; j < W; ++j) for (size_t i = 0; i < n; ++i) if (all[size_t(j) * n + i] != value<T>(j, i)) { note(r, "all_gather from " + std::to_string(j)); j = W; break; }
    for (int root = 0; root < W; ++root) {
      std::vector<T> g(r == root ? size_t(W) * n : 0, T(-77));
      c.gather(in.data(), r == root ? g.data() : nullptr, n * sizeof(T), root, Algo::Shared);
      if (r == root) for (int j = 0; j < W; ++j) for (size_t i = 0; i < n; ++i) if (g[size_t(j) * n + i] != value<T>(j, i)) { note(r, "gather to " + std::to_string(root)); j = W; break; }
      std::vector<T> b = in;
      c.broadcast(b.data(), n * sizeof(T), root, Algo::Shared);
      for (size_t i = 0; i < n; ++i) if (b[i] != value<T>(root, i)) { note(r, "broadcast from " + std::to_string(root)); break; }
    }
    // all_to_all: block r of every rank's input, rank-major
    std::vector<T> a2a(size_t(W) * p.count(r) + 1, T(-77));
    c.allToAll(in.data(), a2a.data(), n, sizeof(T), Algo::Shared);
    for (int j = 0; j < W; ++j) for (size_t i = 0; i < p.count(r); ++i) if (a2a[size_t(j) * p.count(r) + i] != value<T>(j, p.offset(r) + i)) { note(r, "all_to_all from " + std::to_string(j)); j = W; break; }
    if (a2a.back() != T(-77)) note(r, "all_to_all wrote past its output");
  }, streamAbove);
  for (int r = 0; r < W; ++r) {
    const std::string where = tag + " W=" + std::to_string(W) + " n=" + std::to_string(n) + " rank " + std::to_string(r);
    check(errors[size_t(r)].empty(), where + ": " + errors[size_t(r)]);
    for (const std::string& w : wrong[size_t(r)]) check(false, where + ": " + w);
    if (errors[size_t(r)].empty() && wrong[size_t(r)].empty()) check(true, where);
  }
}

void testEveryOpExact() {
  const shm::Layout tiny{0, 1, 4096, 4096, 2};
  const shm::Layout standard{0, 1, 4096, 256 * 1024, 4};
  for (int W : {1, 2, 3, 5}) {
    for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(1000), size_t(5003)}) {
      exactOps<float>(W, tiny, DType::F32, RedOp::Sum, n, "tiny f32 sum");
      exactOps<int64_t>(W, tiny, DType::I64, RedOp::Max, n, "tiny i64 max");
    }
    exactOps<double>(W, tiny, DType::F64, RedOp::Min, 3001, "tiny f64 min");
    exactOps<int32_t>(W, standard, DType::I32, RedOp::Sum, 200003, "standard i32 sum");
  }
  // Ops whose data outgrow the cache write their outputs with streaming stores (every op; here from 64 KiB).
  exactOps<int32_t>(2, standard, DType::I32, RedOp::Sum, 240001, "streamed i32 sum", 64 * 1024);
  exactOps<float>(3, standard, DType::F32, RedOp::Max, 120007, "streamed f32 max", 64 * 1024);
  exactOps<float>(5, tiny, DType::F32, RedOp::Sum, 5003, "streamed tiny f32 sum", 1);
  // Single copy (CMA) wherever an op has it; where this host refuses CMA the ranks would stage.
  if (const std::string refusal = shm::singleCopyRefusal(); !refusal.empty()) return (void)std::printf("skip single-copy ops: %s\n", refusal.c_str());
  for (int W : {1, 2, 3, 5}) {
    for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(1000), size_t(5003)}) exactOps<float>(W, tiny, DType::F32, RedOp::Sum, n, "single-copy f32 sum", 0, true);
    exactOps<int64_t>(W, standard, DType::I64, RedOp::Max, 200003, "single-copy i64 max", 0, true);
  }
  // Pulled reductions (W=2) in chunks of kSingleCopyReduceChunkBytes: two, the second of 2 and 1 elements.
  exactOps<int32_t>(2, standard, DType::I32, RedOp::Sum, shm::kSingleCopyReduceChunkBytes / 2 + 3, "single-copy i32 sum, chunked", 0, true);
}

// all_to_all of records larger than a rank's share of a slot, and than a whole slot (the 1-bit allreduce's
// packed chunks are such records): pieces cut through records, and every byte arrives where it belongs.
void testAllToAllLargeRecords() {
  const shm::Layout tiny{0, 1, 4096, 4096, 2};
  auto byte = [](int rank, size_t i) { return uint8_t((size_t(rank) * 131 + i * 7) % 251); };
  for (int W : {1, 2, 3, 5}) {
    for (size_t esize : {size_t(1000), size_t(3001), size_t(10007)}) {
      for (size_t count : {size_t(0), size_t(1), size_t(W), size_t(2 * W + 1)}) {
        const Partition p{count, W};
        std::vector<std::string> wrong(size_t(W), "");
        auto errors = onSegment(W, tiny, 20, [&](int r, Collectives& c) {
          std::vector<uint8_t> in(count * esize), out(size_t(W) * p.count(r) * esize + 1, 0xEE);
          for (size_t i = 0; i < in.size(); ++i) in[i] = byte(r, i);
          c.allToAll(in.data(), out.data(), count, esize, Algo::Shared);
          const size_t mine = p.count(r) * esize;
          for (int j = 0; j < W; ++j) {
            for (size_t i = 0; i < mine; ++i) {
              if (out[size_t(j) * mine + i] != byte(j, p.offset(r) * esize + i)) { wrong[size_t(r)] = "byte " + std::to_string(i) + " from rank " + std::to_string(j); j = W; break; }
            }
          }
          if (out.back() != 0xEE) wrong[size_t(r)] = "wrote past its output";
        });
        for (int r = 0; r < W; ++r) {
          const std::string where = "all_to_all records of " + std::to_string(esize) + " B W=" + std::to_string(W) + " count=" + std::to_string(count) + " rank " + std::to_string(r);
          check(errors[size_t(r)].empty() && wrong[size_t(r)].empty(), where + ": " + errors[size_t(r)] + wrong[size_t(r)]);
        }
      }
    }
  }
}

// Several messages to one peer in one exchange (the sliced ring sends a slice of each step at once) arrive
// whole and in order, each in its own buffer, though each is many times the channel and the peer keeps
// writing while this rank reads: staged, and with hand-offs (single copy) from 64 KiB between staged ones.
void testMessagesToOnePeerInOrder() {
  const size_t sizes[] = {100'003, 7, 65'536, 50'001, 200'000};
  auto fill = [](int from, size_t m, size_t i) { return uint8_t((size_t(from) * 97 + m * 31 + i * 7 + i / 4096) % 251); };
  // Where this host refuses CMA (qemu-user has no process_vm_readv) the ranks would agree to stage.
  const std::string refusal = shm::singleCopyRefusal();
  if (!refusal.empty()) std::printf("skip hand-offs between messages to one peer: %s\n", refusal.c_str());
  for (size_t handOffFrom : {SIZE_MAX, size_t(65'536)}) {
    if (handOffFrom != SIZE_MAX && !refusal.empty()) continue;
    const std::string how = handOffFrom == SIZE_MAX ? "staged" : "hand-offs from 64 KiB";
    std::vector<std::string> wrong(2, "");
    auto errors = onTransports(2, shm::Layout{0, 1, 4096, 4096, 2}, [&](int r, shm::Segment&, shm::ShmTransport& t) {
      t.handOffFrom(handOffFrom);
      for (int round = 0; round < 20; ++round) {
        std::vector<std::vector<uint8_t>> out, in;
        std::vector<SendSpec> sends;
        std::vector<RecvSpec> recvs;
        for (size_t m = 0; m < std::size(sizes); ++m) {
          out.emplace_back(sizes[m]);
          in.emplace_back(sizes[m], 0xEE);
          for (size_t i = 0; i < sizes[m]; ++i) out[m][i] = fill(r, m, i);
        }
        for (size_t m = 0; m < std::size(sizes); ++m) {
          sends.push_back({1 - r, out[m].data(), sizes[m]});
          recvs.push_back({1 - r, in[m].data(), sizes[m]});
        }
        t.exchange(sends, recvs);
        for (size_t m = 0; m < std::size(sizes); ++m) {
          for (size_t i = 0; i < sizes[m]; ++i) {
            if (in[m][i] != fill(1 - r, m, i)) {
              wrong[size_t(r)] = "round " + std::to_string(round) + ", message " + std::to_string(m) + ", byte " + std::to_string(i);
              return;
            }
          }
        }
      }
    });
    for (int r = 0; r < 2; ++r) {
      check(errors[size_t(r)].empty() && wrong[size_t(r)].empty(), "messages to one peer, " + how + ", rank " + std::to_string(r) + ": " + errors[size_t(r)] + wrong[size_t(r)]);
    }
  }
  // A receiver out of step with a hand-off names the sender and the sizes; the sender's wait ends at the deadline.
  auto errors = onTransports(2, shm::Layout{0, 1, 4096, 4096, 2}, [&](int r, shm::Segment&, shm::ShmTransport& t) {
    t.handOffFrom(65'536);
    t.setDeadline(Clock::now() + std::chrono::milliseconds(500));
    std::vector<uint8_t> buf(100'000);
    if (r == 0) t.send(1, buf.data(), buf.size());
    else t.recv(0, buf.data(), 70'000);
  });
  check(errors[1].find("rank 0 hands off 100000 bytes where this rank receives 70000 from it") != std::string::npos, "hand-off out of step: " + errors[1]);
  check(errors[0].find("deadline passed while sending 100000 bytes to rank 1") != std::string::npos, "hand-off never read: " + errors[0]);
}

void testAbsentRankTimesOut() {
  const auto start = Clock::now();
  auto errors = onSegment(3, shm::Layout{0, 1, 4096, 4096, 2}, 0.5, [](int r, Collectives& c) {
    if (r == 2) return;  // never joins the allreduce
    std::vector<float> v(100, 1.0f);
    c.allreduce(v.data(), v.data(), v.size(), DType::F32, RedOp::Sum, Algo::Shared);
  });
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  for (int r : {0, 1}) {
    check(errors[size_t(r)].find("deadline passed while waiting for rank 2 in a shared allreduce") != std::string::npos,
          "absent rank: rank " + std::to_string(r) + " names rank 2: " + errors[size_t(r)]);
  }
  check(secs < 5, "absent rank: the waits end near the deadline (" + std::to_string(secs) + " s)");
}

// No rank may leave barrier k before every rank has entered it: staggered arrivals make an early exit show.
// Forced shared at every W, with shared ops between the rounds (they share its phase counters), and auto
// where the host's ranks outnumber its CPUs.
void testSharedBarrier() {
  constexpr int kRounds = 4;
  for (int W : {1, 2, 3, 5}) {
    std::vector<std::atomic<int>> entered(kRounds);
    std::atomic<int> early{0}, wrongSum{0};
    const Algo expected = unsigned(W) > onlineCores() ? Algo::Shared : Algo::Dissemination;
    auto errors = onSegment(W, shm::Layout{0, 1, 4096, 4096, 2}, 20, [&](int r, Collectives& c) {
      check(c.resolve(OpKind::Barrier, Algo::Auto, 0) == expected, "auto barrier at W=" + std::to_string(W));
      for (int k = 0; k < kRounds; ++k) {
        std::this_thread::sleep_for(std::chrono::microseconds(((r * 7 + k * 3) % 5) * 300));
        entered[size_t(k)].fetch_add(1);
        c.barrier(k % 2 ? Algo::Shared : Algo::Auto);
        if (entered[size_t(k)].load() != W) early.fetch_add(1);
        float v = 1;
        c.allreduce(&v, &v, 1, DType::F32, RedOp::Sum, Algo::Shared);
        if (v != float(W)) wrongSum.fetch_add(1);
      }
    });
    for (const auto& e : errors) check(e.empty(), "shared barrier W=" + std::to_string(W) + ": " + e);
    check(early.load() == 0, "shared barrier W=" + std::to_string(W) + ": " + std::to_string(early.load()) + " early exits");
    check(wrongSum.load() == 0, "shared barrier W=" + std::to_string(W) + ": allreduce between barriers wrong");
  }
  // A rank that never arrives: rank 0 names it; the others wait on rank 0's release until the deadline.
  auto errors = onSegment(3, shm::Layout{0, 1, 4096, 4096, 2}, 0.5, [](int r, Collectives& c) {
    if (r != 2) c.barrier(Algo::Shared);
  });
  check(errors[0].find("deadline passed while waiting for rank 2 in a shared barrier (the arrivals)") != std::string::npos,
        "absent rank: rank 0 names rank 2: " + errors[0]);
  check(errors[1].find("deadline passed while waiting for rank 0 in a shared barrier") != std::string::npos,
        "absent rank: rank 1 waits on rank 0's release: " + errors[1]);
}

// The start-up timing of staged against single copy (crossover.h): every rank agrees on the same thresholds,
// each a timed size or the default above them, and says how it came by them. Timed only where each rank
// has a CPU, so W=2 is timed on 2 CPUs and more, W=3 on 3 and more; and by none where one rank was told not to
// (SPMD_SHM_SINGLE_COPY=fixed), which leaves all on the defaults.
void testSingleCopyTimed() {
  const std::string refusal = shm::singleCopyRefusal();
  if (!refusal.empty()) return (void)std::printf("skip single copy timed: %s\n", refusal.c_str());
  auto oneOf = [](size_t bytes, size_t otherwise) {
    return bytes == otherwise || std::find(std::begin(shm::kTimedSizes), std::end(shm::kTimedSizes), bytes) != std::end(shm::kTimedSizes);
  };
  struct Case {
    int W, untimedRank;  // -1: every rank may time
  };
  for (auto [W, untimedRank] : {Case{2, -1}, Case{3, -1}, Case{2, 1}}) {
    std::vector<shm::SingleCopyFrom> from(static_cast<size_t>(W));
    std::vector<double> ms(static_cast<size_t>(W));
    auto errors = onTransports(W, shm::Layout{0, 1, 256 * 1024, 256 * 1024, 4}, [&](int r, shm::Segment& seg, shm::ShmTransport& t) {
      shm::SharedCollectives c(seg, t, 0, [&t](const std::string& why) { t.abort(why); });
      c.setDeadline(Clock::now() + std::chrono::seconds(20));
      const Clock::time_point t0 = Clock::now();
      from[size_t(r)] = shm::timeSingleCopy(c, r != untimedRank);
      ms[size_t(r)] = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    });
    const std::string where = "single copy timed, W=" + std::to_string(W) + (untimedRank < 0 ? "" : ", rank " + std::to_string(untimedRank) + " fixed");
    for (const auto& e : errors) check(e.empty(), where + ": " + e);
    const bool timed = unsigned(W) <= onlineCores() && untimedRank < 0;
    for (int r = 0; r < W; ++r) {
      const shm::SingleCopyFrom& f = from[size_t(r)];
      check(f.blocks == from[0].blocks && f.broadcast == from[0].broadcast && f.how == from[0].how && f.reductions == from[0].reductions,
            where + ": rank " + std::to_string(r) + " agrees with rank 0");
    }
    const shm::SingleCopyFrom& f = from[0];
    const bool timedReduction = std::find(std::begin(shm::kReduceTimedSizes), std::end(shm::kReduceTimedSizes), f.reductions) != std::end(shm::kReduceTimedSizes);
    check(f.reductions == SIZE_MAX || (W == shm::kSingleCopyReduceRanks && timedReduction), where + ": reductions from " + std::to_string(f.reductions));
    check(oneOf(f.blocks, shm::kSingleCopyFromBytes), where + ": blocks from " + std::to_string(f.blocks));
    check(W > shm::kSingleCopyFanOutRanks ? f.broadcast == SIZE_MAX : oneOf(f.broadcast, shm::kSingleCopyBroadcastFromBytes), where + ": broadcast from " + std::to_string(f.broadcast));
    // More ranks than CPUs leave the timing out before any rank's word on it is asked.
    const std::string untimedHow = unsigned(W) > onlineCores() ? "not timed: " + std::to_string(W) + " ranks on " : "not timed: SPMD_SHM_SINGLE_COPY=fixed";
    check(f.how.starts_with(timed ? "timed 16-256 KiB at start-up" : untimedHow), where + ": " + f.how);
    if (untimedRank >= 0) check(f.blocks == shm::kSingleCopyFromBytes && f.broadcast == shm::kSingleCopyBroadcastFromBytes && f.reductions == SIZE_MAX, where + ": the defaults");
    std::printf("%s: %s (%.2f ms)\n", where.c_str(), shm::describeCopyPath("", f).c_str(), *std::max_element(ms.begin(), ms.end()));
  }
}

// The start-up's core probe (core_probe.h): W-1 round trips, the same on every rank, each under a millisecond,
// where every rank has a CPU; none where ranks outnumber the CPUs. A busy machine may keep a rank off its CPU past
// the probe's patience, which returns none too: up to 3 tries, one of which must time.
void testCoreRoundTrips() {
  // Where ranks would share CPUs, two threads of rank 0 time one round trip instead, if it may use two CPUs.
  const size_t byThreads = usableCores() >= 2 ? 1 : 0;
  for (int W : {2, 3}) {
    const size_t expected = unsigned(W) <= onlineCores() ? size_t(W - 1) : byThreads;
    const std::string where = "core round trips, W=" + std::to_string(W);
    std::vector<std::vector<double>> ns(static_cast<size_t>(W));
    for (int attempt = 0; attempt < 3 && (attempt == 0 || ns[0].size() != expected); ++attempt) {
      auto errors = onTransports(W, shm::Layout{0, 1, 4096, 4096, 2}, [&](int r, shm::Segment& seg, shm::ShmTransport& t) {
        shm::SharedCollectives c(seg, t, 0, [&t](const std::string& why) { t.abort(why); });
        c.setDeadline(Clock::now() + std::chrono::seconds(20));
        ns[size_t(r)] = shm::timeCoreRoundTrips(c, seg.header().probe, !t.spins());
      });
      for (const auto& e : errors) check(e.empty(), where + ": " + e);
    }
    for (int r = 1; r < W; ++r) check(ns[size_t(r)] == ns[0], where + ": rank " + std::to_string(r) + " agrees with rank 0");
    check(ns[0].size() == expected, where + ": " + std::to_string(ns[0].size()) + " round trips");
    for (double t : ns[0]) check(t > 0 && t < 1e6, where + ": " + std::to_string(t) + " ns");
    if (!ns[0].empty()) std::printf("%s: %.1f ns\n", where.c_str(), ns[0][0]);
  }
  // One rank whose binding shares its CPUs: no rank spins for a partner off the CPU; rank 0's threads time it.
  std::vector<std::vector<double>> shared(2, std::vector<double>{-1});
  for (int attempt = 0; attempt < 3 && (attempt == 0 || shared[0].size() != byThreads); ++attempt) {
    auto errors = onTransports(2, shm::Layout{0, 1, 4096, 4096, 2}, [&](int r, shm::Segment& seg, shm::ShmTransport& t) {
      if (r == 1) t.shareCores(true);
      shm::SharedCollectives c(seg, t, 0, [&t](const std::string& why) { t.abort(why); });
      c.setDeadline(Clock::now() + std::chrono::seconds(20));
      shared[size_t(r)] = shm::timeCoreRoundTrips(c, seg.header().probe, !t.spins());
    });
    for (const auto& e : errors) check(e.empty(), "core round trips, one rank sharing: " + e);
  }
  check(shared[0].size() == byThreads && shared[1] == shared[0], "core round trips, one rank sharing: rank 0's threads time one, both ranks have it");
  for (double t : shared[0]) check(t > 0 && t < 1e6, "core round trips, one rank sharing: " + std::to_string(t) + " ns");
}

// The threshold from the timed readings (µs per timed size, 16-256 KiB): single copy from where it saves the
// most in all, and only when that saves the margin of the staged total; ties stay on the default.
void testCrossoverMargin() {
  const size_t otherwise = shm::kSingleCopyFromBytes;
  auto from = [&](std::array<double, 5> staged, std::array<double, 5> single, double margin = shm::kSwitchMargin) {
    return shm::crossover(shm::kTimedSizes, staged.data(), single.data(), otherwise, margin);
  };
  // An EPYC start-up: single copy 1% ahead from 256 KiB, within noise.
  check(from({3.0, 6.0, 10.3, 20.3, 34.3}, {4.9, 6.3, 10.2, 22.9, 33.5}) == otherwise, "a 1% lead keeps the default");
  // A Xeon one: single copy 10-17% ahead from 128 KiB.
  check(from({1.6, 3.1, 7.9, 26.9, 40.4}, {2.4, 3.5, 7.9, 24.3, 33.4}) == 128 << 10, "a clear lead from 128 KiB moves from 128 KiB");
  // Staged ahead everywhere, and single copy ahead everywhere.
  check(from({1, 2, 4, 8, 16}, {2, 3, 5, 9, 17}) == otherwise, "staged ahead: the default");
  check(from({2, 3, 5, 9, 17}, {1, 2, 4, 8, 16}) == 16 << 10, "single copy ahead: from the smallest size");
  // Broadcasts on EPYC cores that share a cache (a loop: single copy 11% ahead from 32 KiB, which a job of mixed ops
  // reverses) and on cores that share none (4-6x).
  const std::array<double, 5> nearStaged{1.1, 3.6, 5.5, 6.7, 13.1}, nearSingle{2.5, 3.2, 4.4, 6.7, 11.4};
  check(from(nearStaged, nearSingle) == 32 << 10, "blocks' margin: an 11% lead moves");
  check(from(nearStaged, nearSingle, shm::kBroadcastSwitchMargin) == otherwise, "broadcast's margin: an 11% lead keeps the default");
  check(from({5.2, 15.7, 27.5, 47.0, 89.2}, {3.6, 4.0, 5.8, 9.2, 14.7}, shm::kBroadcastSwitchMargin) == 16 << 10, "broadcast's margin: a 4-6x lead moves");
}

// Whether the mapping that holds `p` (/proc/self/smaps) was advised onto huge pages: its VmFlags carry "hg".
bool advisedHuge(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = uintptr_t(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2) inside = lo <= at && at < hi;  // a mapping's first line
    if (inside && line.rfind("VmFlags:", 0) == 0) return line.find(" hg") != std::string::npos;
  }
  return false;
}

// From 2 MiB a host buffer starts on a 2 MiB boundary and its whole 2 MiB pages are advised onto huge pages, so that
// a peer's process_vm_readv walks one entry per 2 MiB (a W = 2 all_gather of 2 MiB inputs ran 1.7x faster than on
// 4 KiB pages); below, 64-byte alignment and no advice, so that no small tensor takes a whole huge page.
void testHostBuffers() {
  constexpr size_t kHuge = size_t(2) << 20;
  // Whether this process's smaps shows the advice at all: not without THP, nor under qemu-user (the aarch64 run),
  // which does not pass madvise on. A mapping of our own, advised directly, tells.
  const size_t probeBytes = 2 * kHuge;
  void* probe = mmap(nullptr, probeBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  const bool shown = probe != MAP_FAILED && madvise(probe, probeBytes, MADV_HUGEPAGE) == 0 && advisedHuge(probe);
  if (probe != MAP_FAILED) munmap(probe, probeBytes);
  for (size_t bytes : {kHuge - 64, kHuge, kHuge + 4096, 3 * kHuge + 100}) {
    std::unique_ptr<void, decltype(&std::free)> p(allocHost(bytes), &std::free);
    const auto at = uintptr_t(p.get());
    const std::string what = "a host buffer of " + std::to_string(bytes) + " bytes";
    check(at % 64 == 0, what + " starts on a cache line");
    if (bytes < kHuge) continue;
    check(at % kHuge == 0, what + " starts on a 2 MiB boundary");
    std::memset(p.get(), 1, bytes);  // touched, as a tensor's fill is
    if (shown) check(advisedHuge(p.get()), what + " is advised onto huge pages (VmFlags hg)");
  }
}

void testSharedNeedsSegment() {
  struct NoTransport : Transport {
    int rank() const override { return 0; }
    int size() const override { return 2; }
    void exchange(std::span<const SendSpec>, std::span<const RecvSpec>) override {}
  } t;
  TransportCollectives c(t, [](const std::string&) {});
  try {
    c.resolve(OpKind::AllReduce, Algo::Shared, 8);
    check(false, "shared without a segment is refused");
  } catch (const CommError& e) {
    check(std::string(e.code()) == code::kUnsupported && std::string(e.what()).find("shm backend") != std::string::npos,
          std::string("shared without a segment: ") + e.what());
  }
}

}  // namespace

int main() {
  return spmd::testing::runTests({
      {"every op exact", testEveryOpExact}, {"large records", testAllToAllLargeRecords}, {"messages to one peer", testMessagesToOnePeerInOrder}, {"absent rank", testAbsentRankTimesOut}, {"barrier", testSharedBarrier}, {"needs segment", testSharedNeedsSegment}, {"single copy timed", testSingleCopyTimed}, {"crossover margin", testCrossoverMargin}, {"core round trips", testCoreRoundTrips}, {"host buffers", testHostBuffers}});
}
