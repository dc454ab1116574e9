// The statistics behind `runner compare` and `exp compare` (src/metrics/verdict.ts): per repetition the
// fastest iteration, a regression only when the change holds across repetitions and beyond the threshold.
import assert from "node:assert/strict";
import { test } from "node:test";
import { apartRepetitions, coreRoundTrip, coresApart, describeMachines, judge, judgeAlike, machines, mixedPaths, oversubscribed, repetitionValue, startupApart } from "../dist/metrics/verdict.js";

test("a repetition's value is taken at its fastest iteration: a stalled iteration moves nothing", () => {
  const row = { avg_us: 30, p50_us: 11, min_us: 10, busbw: 2 };
  assert.equal(repetitionValue("time.avg_us", (k) => row[k]), 10);
  assert.equal(repetitionValue("busbw", (k) => row[k]), 6, "busbw at the fastest time: 2 GB/s x 30/10");
  assert.equal(repetitionValue("time.p95_us", (k) => ({ p95_us: 7 })[k]), 7, "other metrics as recorded");
});

test("one slow repetition on either side decides nothing; a change in every repetition beyond the threshold does", () => {
  const same = [10, 10.2, 9.9];
  assert.equal(judge(same, [10, 10.1, 4], "higher", 0.13).verdict, "within tolerance", "one slow repetition after");
  assert.equal(judge([10, 3, 9.9], same, "higher", 0.13).verdict, "within tolerance", "one slow repetition before");
  assert.equal(judge(same, [5, 5.1, 20], "higher", 0.13).verdict, "within noise", "two slow, one fast");
  const twice = judge(same, same.map((v) => v / 2), "higher", 0.13);
  assert.equal(twice.verdict, "regression");
  assert.ok(twice.interval[1] < -0.13, JSON.stringify(twice));
  assert.equal(judge(same, same.map((v) => v * 2), "lower", 0.13).verdict, "regression", "twice the time: lower is better");
  assert.equal(judge(same, same.map((v) => v * 1.1), "higher", 0.13).verdict, "within tolerance");
});

test("one baseline repetition that itself ran 2x slow cannot hide a 2x slowdown; two can, and twice no threshold is no bar", () => {
  const before = [10, 10.2, 5], after = [5, 5.1, 4.95];
  const j = judge(before, after, "higher", 0.13);
  assert.equal(j.verdict, "regression", JSON.stringify(j));
  assert.ok(j.interval[1] > -0.13, "the pairs with the slow repetition alone would leave it within noise");
  assert.equal(judge(after.map((v) => 1 / v), before.map((v) => 1 / v), "lower", 0.13).verdict, "improvement", "the same as times, the other way");
  assert.equal(judge([10, 5.2, 5], after, "higher", 0.13).verdict, "within tolerance", "two slow baseline repetitions: as slow as after, by the medians");
  assert.equal(judge([9, 4, 10], [6, 8, 5], "higher", 0).verdict, "within noise", "a lead that does not hold across repetitions");
});

test("a 1.3x slowdown is found with 5 repetitions a side, though one pair of repetitions overlaps", () => {
  const before = [9.46, 9.52, 9.85, 8.76, 9.64], after = [9.37, 7.3, 9.22, 8.91, 9.35].map((v) => v * 1.3);
  const j = judge(before, after, "lower", 0.13);
  assert.equal(j.verdict, "regression", JSON.stringify(j));
});

test("a 1.3x slowdown against a baseline that ran two of five repetitions slow: every pair slower, the medians and the best beyond 1.5x the threshold", () => {
  // all_gather 2 MiB at W = 2, two campaigns on the Zen 5 VM (docs/PERFORMANCE.md, "Comparing campaigns on a Zen 5 VM"), µs.
  const before = [114.43, 96.42, 98.45, 96.8, 116.36], after = [97.88, 97.72, 93.56, 93.77, 97.03];
  assert.equal(judge(before, after, "lower", 0.13).verdict, "within tolerance", "identical");
  const j = judge(before, after.map((v) => v * 1.3), "lower", 0.13);
  assert.equal(j.verdict, "regression", JSON.stringify(j));
  assert.ok(j.interval[1] > -0.13 && j.interval[1] < 0, "the interval alone would leave it within noise");
  assert.equal(judge(after.map((v) => 1 / (v * 1.3)), before.map((v) => 1 / v), "higher", 0.13).verdict, "improvement", "the other way");
  // The same medians with repetitions that cross: within noise.
  assert.equal(judge([114.43, 96.42, 98.45, 96.8, 116.36], [127.2, 90, 126.6, 121.6, 150], "lower", 0.13).verdict, "within noise");
});

test("too few repetitions is said, not judged", () => {
  assert.equal(judge([10, 10], [5, 5], "higher", 0.13).verdict, "too few repetitions");
  assert.equal(judge([10], [5, 5, 5], "higher", 0.13).verdict, "too few repetitions");
  assert.equal(judge([10, 10], [10, 10.1], "higher", 0.13).verdict, "within tolerance", "no change needs no test");
});

test("ranks that outnumber their host's cores are named; a file without cores (before they were recorded) says nothing", () => {
  const doc = (ranks, cores) => ({
    topology: { hosts: [{ name: "a", ranks: [0, 1] }, { name: "b", ranks: Array.from({ length: ranks }, (_, i) => 2 + i) }] },
    manifest: { hosts: [{ name: "a", cpu: "x", cores: 2, gpus: [] }, { name: "b", cpu: "x", cores, gpus: [] }] },
  });
  assert.equal(oversubscribed(doc(3, 2)), "3 ranks on 2 cores (b)");
  assert.equal(oversubscribed(doc(2, 2)), undefined);
  assert.equal(oversubscribed(doc(3, undefined)), undefined);
  assert.equal(oversubscribed({}), undefined);
  // A stranger's file with fields of the wrong shape says nothing rather than throwing.
  for (const bad of [{ manifest: { hosts: 5 }, topology: { hosts: "x" } }, { topology: { hosts: [null, { name: "b", ranks: 7 }] }, manifest: { hosts: [null, { name: "b", cores: "2" }] } }]) {
    assert.equal(oversubscribed(bad), undefined);
  }
  assert.equal(oversubscribed({ ...doc(3, 2), manifest: { hosts: [null, { name: "b", cores: 2 }] } }), "3 ranks on 2 cores (b)");
});

test("a repetition that ran apart in most rows is named; a change in every repetition, one stalled row or too few repetitions are not", () => {
  // Eight rows of five repetitions; repetition 2 (index 1) met a spell in six of them.
  const rows = Array.from({ length: 8 }, (_, i) => [10 + i, 10.3 + i, 9.8 + i, 10.1 + i, 10.2 + i]);
  const spell = rows.map((r, i) => r.map((v, k) => (k === 1 && i < 6 ? v * 4 : v)));
  const [apart, ...more] = apartRepetitions(spell);
  assert.deepEqual(more, []);
  assert.equal(apart.index, 1);
  assert.deepEqual([apart.rows, apart.of], [6, 8]);
  assert.ok(Math.abs(apart.low - 4.0) < 0.2 && Math.abs(apart.high - 4.2) < 0.2, JSON.stringify(apart));
  // The cheap placement runs small rows fast and large ones slow: apart either way.
  const mixed = rows.map((r, i) => r.map((v, k) => (k === 4 ? v * (i < 4 ? 0.5 : 1.8) : v)));
  assert.deepEqual(apartRepetitions(mixed).map((a) => [a.index, a.rows, a.of]), [[4, 8, 8]]);
  assert.deepEqual(apartRepetitions(rows.map((r) => r.map((v) => v * 2))), [], "a 2x slowdown moves every repetition alike");
  assert.deepEqual(apartRepetitions(rows.map((r, i) => r.map((v, k) => (k === 0 && i === 3 ? v * 9 : v)))), [], "one row of one repetition");
  assert.deepEqual(apartRepetitions(spell.slice(0, 1)), [], "one row apart is not a repetition apart");
  assert.deepEqual(apartRepetitions(spell.map((r) => r.slice(0, 2))), [], "two repetitions have no median to be apart from");
  assert.deepEqual(apartRepetitions(spell.map((r) => [r[0], undefined, r[1], r[2]])).map((a) => a.index), [2], "a repetition without the row keeps its place");
});

test("a repetition's start-up copy path, where it differs from the others' most common one", () => {
  const at = (from) => `single-copy: cma (process_vm_readv/writev) from ${from}, broadcast from 4 MiB (timed 16-256 KiB at start-up)`;
  const paths = [at("1 MiB"), at("64 KiB"), at("16 KiB"), at("1 MiB"), undefined];
  assert.equal(startupApart(paths, 2), "its start-up chose single copy from 16 KiB, broadcast from 4 MiB, the others' mostly single copy from 1 MiB, broadcast from 4 MiB");
  assert.equal(startupApart(paths, 0), "", "another repetition's too");
  assert.equal(startupApart([at("16 KiB"), at("1 MiB"), at("16 KiB"), at("1 MiB")], 0, [0, 2]), "its start-up chose single copy from 16 KiB, broadcast from 4 MiB, the others' mostly single copy from 1 MiB, broadcast from 4 MiB", "two apart alike: against the steady ones");
  assert.equal(startupApart(paths, 1), "its start-up chose single copy from 64 KiB, broadcast from 4 MiB, the others' mostly single copy from 1 MiB, broadcast from 4 MiB");
  assert.equal(startupApart(paths, 4), "", "a file without one says nothing");
  assert.equal(startupApart([at("1 MiB"), 7, null], 0), "", "nothing to compare with");
  assert.equal(startupApart([`single-copy from ${"x from ".repeat(1e5)}`, at("1 MiB"), at("1 MiB")], 0), "", "a stranger's megabyte is no copy path");
  assert.equal(startupApart(["staged (SPMD_SHM_SINGLE_COPY=0)", at("1 MiB"), at("1 MiB")], 0), "its start-up chose staged (SPMD_SHM_SINGLE_COPY=0), the others' mostly single copy from 1 MiB, broadcast from 4 MiB");
});

test("a point's launches that took more than one copy path are counted by path, most first; one path, or none recorded, says nothing", () => {
  const at = (from, how = "timed 16-256 KiB at start-up") => `single-copy: cma (process_vm_readv/writev) from ${from}, broadcast from 4 MiB (${how})`;
  assert.equal(mixedPaths([at("128 KiB"), at("1 MiB"), at("1 MiB"), undefined, at("1 MiB")]), "3 single copy from 1 MiB, broadcast from 4 MiB; 1 single copy from 128 KiB, broadcast from 4 MiB");
  assert.equal(mixedPaths([at("1 MiB"), at("1 MiB", "not timed: SPMD_SHM_SINGLE_COPY=fixed")]), "", "the same sizes, however they came");
  assert.equal(mixedPaths([at("1 MiB"), 7, null]), "", "a field of another shape is no path");
  assert.equal(mixedPaths([`single-copy from ${"x from ".repeat(1e5)}`, at("1 MiB")]), "", "a stranger's megabyte is no copy path");
  assert.equal(mixedPaths(["staged (rank 0: SPMD_SHM_SINGLE_COPY=0)", at("1 MiB")]), "1 staged (rank 0: SPMD_SHM_SINGLE_COPY=0); 1 single copy from 1 MiB, broadcast from 4 MiB");
});

test("launches measured the same machine where their core round trips lie within 1.5x of the next; a file's field of another shape says nothing", () => {
  assert.deepEqual(machines([49, 320, 52, 67, 301, 347]), [0, 1, 0, 0, 1, 1], "the EPYC VM's two states");
  assert.deepEqual(machines([50, 70, 98, 137]), [0, 0, 0, 0], "a chain of small steps is one machine");
  assert.deepEqual(machines([50, undefined, 320]), [0, undefined, 1], "a launch without one is placed on none");
  assert.equal(machines([undefined, undefined]), undefined, "none has one: cannot tell");
  assert.equal(coreRoundTrip([49.5, 320.2]), 320.2, "the farthest pair");
  for (const odd of [undefined, null, "320", [], [NaN], [-1], { ns: 3 }]) assert.equal(coreRoundTrip(odd), undefined, JSON.stringify(odd));
  assert.equal(coreRoundTrip([...new Array(2e6).fill(50), 60]), 60, "a stranger's two million entries: no stack overflow");
  assert.equal(describeMachines([["A", [50, 52, 51]], ["B", [51, 53]]]), "", "one machine: nothing to say");
  assert.equal(describeMachines([["A", [50, 52, 51]], ["B", [320, 51, 330]]]), "A: 3 at 50-52 ns; B: 1 at 51 ns, 2 at 320-330 ns");
});

test("like with like: identical runs on two machines are not a regression; a 2x slowdown on the machine both measured is, with 3 launches against 1", () => {
  const m = (values, trips) => values.map((value, i) => ({ value, roundTrip: trips[i] }));
  const near = m([10, 10.2, 9.9], [50, 51, 52]);
  assert.equal(judgeAlike(near, m([2, 2.1, 1.9], [320, 330, 310]), "higher", 0.13).verdict, "machine differed");
  assert.equal(judge([10, 10.2, 9.9], [2, 2.1, 1.9], "higher", 0.13).verdict, "regression", "what the values alone say");
  assert.equal(judgeAlike(near, m([10.1, 2.1, 1.9], [50, 330, 310]), "higher", 0.13).verdict, "within tolerance", "as fast where alike");
  assert.equal(judgeAlike(near, m([5, 1, 0.9], [50, 330, 310]), "higher", 0.13).verdict, "regression");
  assert.equal(judgeAlike(near, m([10.1, 9.8, 10], [50, 51, 52]), "higher", 0.13).verdict, "within tolerance", "one machine: judge()");
  assert.equal(judgeAlike(near, m([5, 5.1, 4.9], [undefined, 51, 52]), "higher", 0.13).verdict, "regression", "a launch without a round trip beside one machine: judge() over all");
  // A probe that gave up under load (fxfiveload c2): four far launches and one unplaced against five near ones share no machine.
  const far = m([9.2, 9.5, 9.1, 9.4, 9.3], [413, undefined, 407, 425, 423]);
  assert.equal(judgeAlike(far, m([12.1, 12.4, 11.9, 12.2, 12.0], [98, 82, 81, 87, 78]), "higher", 0.13).verdict, "machine differed");
  assert.equal(judgeAlike(far, m([4.6, 4.7, 4.5, 4.8], [410, 420, 415, 408]), "higher", 0.13).verdict, "regression", "the placed launches all on one machine: judge() over all");
  assert.equal(judgeAlike(m([10, 9.9, 10.1], [undefined, undefined, undefined]), m([5, 1, 0.9], [50, 330, 310]), "higher", 0.13).verdict, "regression", "a side without round trips (an older file): judge() over all");
  // Both sides on both machines: each machine judged apart, and they must agree.
  const mixed = m([10, 2, 9.9, 2.1], [50, 320, 51, 330]);
  assert.equal(judgeAlike(mixed, m([2, 10.1, 1.9, 2.2], [320, 50, 310, 330]), "higher", 0.13).verdict, "within tolerance", "each machine as fast as before, though the medians over all differ 3x");
  assert.equal(judgeAlike(m([10, 9.9, 10.1, 2, 2.1, 2], [50, 51, 52, 320, 330, 310]), m([5, 5.1, 4.9, 1, 1.1, 1], [50, 51, 52, 320, 330, 310]), "higher", 0.13).verdict, "regression");
  // The numbers shown are those judged: over all launches B is 2.5x faster (two of A's were far), on the machine
  // both measured half as fast; a line "REGRESSION ... (150% better)" would contradict itself.
  const j = judgeAlike(m([10, 2, 2.1], [50, 320, 330]), m([5, 5.1, 4.9], [50, 51, 52]), "higher", 0.13);
  assert.deepEqual([j.verdict, j.before, j.after, j.gain, j.alike], ["regression", 10, 5, -0.5, true]);
});

test("like with like even where the medians over all launches agree, and 3 launches against 2 on a machine", () => {
  const m = (values, trips) => values.map((value, i) => ({ value, roundTrip: trips[i] }));
  // allreduce 1 MiB, µs: two of the baseline's launches far (2.3x slower), the new campaign's all near.
  const before = m([96.72, 94.42, 42.42], [406, 406, 66]), near = [43.63, 45.16, 42.85], trips = [55, 75, 59];
  assert.equal(judgeAlike(before, m(near, trips), "lower", 0.13).verdict, "within tolerance", "identical");
  const twice = judgeAlike(before, m(near.map((v) => v * 2), trips), "lower", 0.13);
  assert.equal(judge(before.map((x) => x.value), near.map((v) => v * 2), "lower", 0.13).verdict, "within tolerance", "what the medians over all say");
  assert.deepEqual([twice.verdict, twice.alike], ["regression", true]);
  // all_gather 512 KiB: a baseline launch that ran 1.5x slow, against 2 launches of that machine (the third far).
  const slow = judgeAlike(m([15.47, 10.61, 12.98], [81, 76, 77]), m([18.19, 10.56, 10.21].map((v) => v * 2), [423, 72, 69]), "lower", 0.13);
  assert.equal(slow.verdict, "regression");
  // Three ranks on two cores under load: pairs of the far machine cross, so within noise.
  assert.equal(judgeAlike(m([24.27, 35.83, 17.42], [73, 406, 436]), m([62.83, 26.46, 37.65], [402, 412, 408]), "lower", 0.13).verdict, "within noise");
});

test("a 1.3x slowdown against 5 launches, with 1 of the new campaign's on the machine they share; 3 against 1 still needs twice the threshold", () => {
  const m = (values, trips) => values.map((value, i) => ({ value, roundTrip: trips[i] }));
  // all_gather 512 KiB, µs, on the Zen 5 VM's far state (440 ns); the new campaign's other launches near (50 ns).
  const base = [18.7, 19.8, 18.4, 20.6, 18.1], far = Array(5).fill(440), trips = [440, 50, 50, 50, 50];
  const slower = judgeAlike(m(base, far), m([24.7, 9.6, 9.4, 9.9, 9.5], trips), "lower", 0.13);
  // Medians 24% apart and the best 27%: beyond 1.5x the threshold, short of twice it, every pair beyond it.
  assert.deepEqual([slower.verdict, slower.alike], ["regression", true]);
  assert.equal(judgeAlike(m(base, far), m([19.0, 9.6, 9.4, 9.9, 9.5], trips), "lower", 0.13).verdict, "within tolerance", "identical");
  assert.equal(judgeAlike(m(base, far), m([22.0, 9.6, 9.4, 9.9, 9.5], trips), "lower", 0.13).verdict, "within noise", "a pair within the threshold");
  // 3 against 1: chance orders one launch beyond three in 1 of 4 draws, so the bar is twice the threshold.
  assert.equal(judgeAlike(m(base.slice(0, 3), far), m([24.7, 9.6, 9.4], trips), "lower", 0.13).verdict, "within noise");
  assert.equal(judgeAlike(m(base.slice(0, 3), far), m([26.0, 9.6, 9.4], trips), "lower", 0.13).verdict, "regression", "twice the threshold");
});

test("a repetition's start-up that timed its ranks' cores on another machine than the others' is said so", () => {
  assert.equal(coresApart([320.4, 50, 52], 0), "its start-up timed the ranks' cores 320 ns apart, the others' 50-52 ns");
  assert.equal(coresApart([50, 50.2, 52], 0), "", "one machine");
  assert.equal(coresApart([320, 50, 330], 0, [0, 2]), "its start-up timed the ranks' cores 320 ns apart, the others' 50 ns", "two apart alike: against the steady ones");
  assert.equal(coresApart([320, undefined, 50], 0), "its start-up timed the ranks' cores 320 ns apart, the others' 50 ns", "a file without one is left out");
  assert.equal(coresApart([undefined, 50], 0), "", "its own not timed: nothing to say");
  assert.equal(coresApart([320, 50, 310], 0), "", "another repetition measured its machine too");
});
