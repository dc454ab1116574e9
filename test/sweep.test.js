// Sweeps: counts × stage parameters, one row per point; parameters that fit no stage are errors.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { parseJob } from "../dist/config/load.js";
import { validateGraph } from "../dist/graph/validate.js";
import { applyParams, sweepPoints } from "../dist/graph/sweep.js";
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
