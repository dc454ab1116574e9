// The statistics behind `runner compare` and `exp compare` (src/metrics/verdict.ts): per repetition the
// fastest iteration, a regression only when the change holds across repetitions and beyond the threshold.
import assert from "node:assert/strict";
import { test } from "node:test";
import { apartRepetitions, judge, oversubscribed, repetitionValue, startupApart } from "../dist/metrics/verdict.js";

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
