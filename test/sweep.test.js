// Sweeps: counts × stage parameters, one row per point; parameters that fit no stage are errors.
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { parseJob } from "../dist/config/load.js";
import { validateGraph } from "../dist/graph/validate.js";
import { applyParams, sweepPoints } from "../dist/graph/sweep.js";
import { MAX_TIMED_STEPS, stepsFor } from "../dist/graph/execute.js";
import { RUNNER, runNode } from "./helpers/ranks.js";

const job = (sweep) => parseJob(JSON.stringify({
  name: "s", tensors: { t: { dtype: "float32", count: 64 } },
  stages: [{ id: "ar", op: "allreduce", input: "t" }, { id: "g", op: "gather", input: "t" }, { id: "b", op: "barrier" }],
  sweep,
}), "s.json");

test("points are the product of counts and parameter values, counts outermost", () => {
  const points = sweepPoints(job({ count: [8, 16], params: { algorithm: ["tree", "direct"], "ar.reduce": ["sum", "max"] } }));
  assert.equal(points.length, 8);
  assert.deepEqual(points[0], { count: 8, params: { algorithm: "tree", "ar.reduce": "sum" } });
  assert.deepEqual(points[7], { count: 16, params: { algorithm: "direct", "ar.reduce": "max" } });
  assert.deepEqual(sweepPoints(job(undefined)), [{ count: undefined, params: {} }]);
  assert.deepEqual(sweepPoints(job({ count: { from: 4, to: 32, factor: 2 } })).map((p) => p.count), [4, 8, 16, 32]);
});

test("a bare key goes to every stage it fits; a qualified key to its stage only", () => {
  const j = job({ params: { algorithm: ["ring"] } });
  const { job: out, applied } = applyParams(j, { algorithm: "ring" }, "s.json");
  assert.equal(out.stages[0].algorithm, "ring", "allreduce takes ring");
  assert.equal(out.stages[1].algorithm, "auto", "gather has no ring: untouched");
  assert.deepEqual([...applied], [["ar", { algorithm: "ring" }]]);
  const tree = applyParams(j, { algorithm: "tree", "g.root": 1 }, "s.json");
  assert.deepEqual([...tree.applied], [["ar", { algorithm: "tree" }], ["g", { algorithm: "tree", root: 1 }]]);
});

test("parameters that fit nothing are one-line errors naming the sweep entry", () => {
  assert.throws(() => validateGraph(job({ params: { algorithm: ["bogus"] } }), "s.json"), { message: 's.json: sweep.params.algorithm: "bogus" fits no stage\'s "algorithm"' });
  assert.throws(() => validateGraph(job({ params: { "nope.root": [1] } }), "s.json"), { message: 's.json: sweep.params["nope.root"]: no stage "nope" (stages: ar, g, b)' });
  assert.throws(() => validateGraph(job({ params: { "g.root": [-1] } }), "s.json"), /sweep\.params\["g\.root"\]: -1 does not fit stage "g"/);
  assert.throws(() => parseJob(JSON.stringify({ name: "s", stages: [{ id: "b", op: "barrier" }], sweep: {} }), "s.json"), /s\.json: line 1 column \d+: sweep: expected "count", "params" or both/);
});

test("a parameter sweep runs one row per point with the parameters recorded, exact results", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-sweep-"));
  try {
    const file = path.join(dir, "job.json");
    writeFileSync(file, JSON.stringify({
      name: "s", iterations: 2, warmup: 1, check: true, tensors: { t: { dtype: "float32", count: 100 } },
      stages: [{ id: "ar", op: "allreduce", input: "t" }], sweep: { count: [10, 1000], params: { algorithm: ["ring", "tree", "direct"] } },
    }));
    const json = path.join(dir, "r.json");
    const p = await runNode([RUNNER, "launch", "-n", "3", file, "--out", dir, "--json", json]);
    assert.equal(p.code, 0, p.stderr);
    const rows = JSON.parse(readFileSync(json, "utf8")).results;
    assert.deepEqual(rows.map((r) => [r.count, r.algorithm, r.params.algorithm, r.wrong]), [
      [10, "ring", "ring", 0], [10, "tree", "tree", 0], [10, "direct", "direct", 0],
      [1000, "ring", "ring", 0], [1000, "tree", "tree", 0], [1000, "direct", "direct", 0],
    ]);
    assert.match(p.stdout, /ar\[algorithm=tree\] +allreduce +tree /);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("minTimeMs: the steps a point needs to last that long, from its rows' median step; never fewer, at most the cap", () => {
  const rows = (...p50) => p50.map((p50_us) => ({ time: { p50_us } }));
  assert.equal(stepsFor(10, 20, rows(100, 150)), 40); // 20 steps of 250 us = 5 ms: twice as many for 10 ms
  assert.equal(stepsFor(10, 20, rows(600)), 20); // 12 ms already
  assert.equal(stepsFor(0, 20, rows(1)), 20);
  assert.equal(stepsFor(1000, 20, rows(0)), MAX_TIMED_STEPS); // zero-length stages: as many as allowed
  assert.equal(stepsFor(1000, MAX_TIMED_STEPS + 5, rows(0)), MAX_TIMED_STEPS + 5);
});

test("minTimeMs: every rank runs a short point's steps again, more of them, as one; the rows say how many", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-mintime-"));
  try {
    const file = path.join(dir, "job.json");
    writeFileSync(file, JSON.stringify({
      name: "m", iterations: 3, warmup: 1, check: true, minTimeMs: 5, tensors: { t: { dtype: "float32", count: 7 } },
      stages: [{ id: "ar", op: "allreduce", input: "t" }, { id: "ag", op: "all_gather", input: "t" }], sweep: { count: [0, 1001] },
    }));
    const json = path.join(dir, "r.json");
    const p = await runNode([RUNNER, "launch", "-n", "2", file, "--out", dir, "--json", json, "--samples"]);
    assert.equal(p.code, 0, p.stderr);
    const rows = JSON.parse(readFileSync(json, "utf8")).results;
    assert.deepEqual(rows.map((r) => [r.stage, r.count, r.wrong]), [["ar", 0, 0], ["ag", 0, 0], ["ar", 1001, 0], ["ag", 2002, 0]]);
    for (const r of rows) {
      assert.ok(r.iterations > 3 && r.iterations <= MAX_TIMED_STEPS, `${r.stage} ${r.count}: ${r.iterations} steps`);
      assert.equal(r.samples.slowest_us.length, r.iterations);
      assert.ok(r.samples.per_rank_us.every((times) => times.length === r.iterations));
    }
    // Both stages of a point ran in the same steps.
    assert.equal(rows[0].iterations, rows[1].iterations);
    // The comms summary counts a row's own steps as its calls.
    const run = readdirSync(dir).find((f) => f.startsWith("m-"));
    const summary = readFileSync(path.join(dir, run, "summary.txt"), "utf8");
    assert.match(summary, new RegExp(`^all_gather\\n.*\\n +7\\.82 KiB +${rows[3].iterations} `, "m"));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
