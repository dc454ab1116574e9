// Every stage at world sizes 1, 2, 3, 4 and 8 (8 ranks on 2 cores), counts 0, 1, 7 and 1003 in every
// dtype and reduction, checked element by element here in JavaScript from the inputs each rank dumped,
// and counts of 1000003 checked element by element by the runner's own check (--check).
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { readNpy } from "./helpers/npy.js";
import { runRanks } from "./helpers/ranks.js";

const WORLDS = [1, 2, 3, 4, 8];

function exactStages(t, W, { big = false } = {}) {
  const last = W - 1;
  const s = [];
  const add = (op, extra = {}, tag = "") => s.push({ id: `${t}.${op}${tag}`, op, ...extra });
  for (const algorithm of ["ring", "tree", "direct"]) add("allreduce", { input: t, reduce: "sum", algorithm }, `.${algorithm}`);
  for (const reduce of ["mean", "max", "min"]) add("allreduce", { input: t, reduce }, `.${reduce}`);
  for (const algorithm of ["ring", "direct"]) add("reduce_scatter", { input: t, algorithm }, `.${algorithm}`);
  for (const reduce of ["mean", "max"]) add("reduce_scatter", { input: t, reduce }, `.${reduce}`);
  for (const algorithm of ["ring", "direct"]) add("all_gather", { input: t, algorithm }, `.${algorithm}`);
  for (const algorithm of ["direct", "tree"]) add("gather", { input: t, root: last, algorithm }, `.${algorithm}`);
  add("igather", { input: t, root: 0 });
  for (const algorithm of ["tree", "direct"]) add("broadcast", { input: t, root: last, algorithm }, `.${algorithm}`);
  add("reduce", { input: t, root: last, reduce: "sum", algorithm: "tree" }, ".sum");
  add("reduce", { input: t, root: 0, reduce: "min", algorithm: "direct" }, ".min");
  for (const algorithm of ["tree", "direct"]) add("scatter", { input: t, root: last, algorithm }, `.${algorithm}`);
  add("all_to_all", { input: t });
  add("send_recv", { input: t, shift: 1 }, ".1");
  if (!big) add("send_recv", { input: t, shift: -2 }, ".-2");
  return s;
}

function typedStages(t, dtype, W) {
  const s = [];
  const add = (op, extra, tag = "") => s.push({ id: `${t}.${op}${tag}`, op, ...extra });
  for (const reduce of ["sum", "max", "min", ...(dtype === "float64" ? ["mean"] : [])]) add("allreduce", { input: t, reduce }, `.${reduce}`);
  add("reduce_scatter", { input: t });
  add("all_gather", { input: t });
  add("broadcast", { input: t, root: 0 });
  add("reduce", { input: t, root: W - 1 });
  return s;
}

function smallJob(W) {
  const tensors = {}, stages = [];
  for (const n of [0, 1, 7, 1003]) {
    tensors[`f32_${n}`] = { dtype: "float32", count: n, fill: { kind: "integers", seed: n + 11, low: -9, high: 9 } };
    stages.push(...exactStages(`f32_${n}`, W));
  }
  for (const dtype of ["int32", "int64", "float64", "float16", "bfloat16"]) {
    for (const n of [7, 1003]) {
      const t = `${dtype}_${n}`;
      tensors[t] = { dtype, count: n, fill: { kind: "integers", seed: n, low: -4, high: 4 } };
      stages.push(...typedStages(t, dtype, W));
    }
  }
  stages.push({ id: "coalesced", op: "reduce_scatter", inputs: ["f32_1003", "f32_1", "f32_0", "f32_7"], coalesced: true });
  stages.push({ id: "coalesced_one", op: "reduce_scatter", inputs: ["f32_1"], coalesced: true, reduce: "mean" });
  stages.push({ id: "barrier", op: "barrier" }, { id: "compute", op: "compute", us: 10, after: ["barrier"] });
  return { name: `matrix-${W}`, iterations: 1, warmup: 1, check: true, tensors, stages };
}

function bigJob(W) {
  const tensors = { f32_big: { dtype: "float32", count: 1000003, fill: { kind: "integers", seed: 99, low: -9, high: 9 } } };
  return { name: `big-${W}`, iterations: 1, warmup: 0, check: true, tensors, stages: exactStages("f32_big", W, { big: true }) };
}

// --- the reference semantics, written independently of the native code ---
const block = (n, W) => Math.ceil(n / W);
const off = (n, W, i) => Math.min(n, i * block(n, W));
const cnt = (n, W, i) => Math.min(n, off(n, W, i) + block(n, W)) - off(n, W, i);
const round = { float32: Math.fround, float64: (v) => v };

function reduceAcross(xs, reduce, dtype, W) {
  const n = xs[0].length;
  return Array.from({ length: n }, (_, i) => {
    const col = xs.map((x) => x[i]);
    if (reduce === "max") return Math.max(...col);
    if (reduce === "min") return Math.min(...col);
    const sum = col.reduce((a, b) => a + b, 0);
    if (reduce === "mean") return round[dtype](sum / W);
    return dtype === "int32" ? sum | 0 : sum;
  });
}

function expected(stage, r, W, inputs, dtype) {
  const x = inputs;            // x[s] = rank s's input (one tensor)
  const n = x[0].length;
  const reduce = stage.reduce ?? "sum";
  switch (stage.op) {
    case "allreduce": return reduceAcross(x, reduce, dtype, W);
    case "reduce_scatter": return reduceAcross(x, reduce, dtype, W).slice(off(n, W, r), off(n, W, r) + cnt(n, W, r));
    case "all_gather": return x.flat();
    case "gather": case "igather": return r === stage.root ? x.flat() : [];
    case "broadcast": return x[stage.root];
    case "reduce": return r === stage.root ? reduceAcross(x, reduce, dtype, W) : [];
    case "scatter": return x[stage.root].slice(off(n, W, r), off(n, W, r) + cnt(n, W, r));
    case "all_to_all": return x.flatMap((xs) => xs.slice(off(n, W, r), off(n, W, r) + cnt(n, W, r)));
    case "send_recv": return x[(((r - stage.shift) % W) + W) % W];
  }
  throw new Error(`no reference for ${stage.op}`);
}

function verifyDumps(job, W, dir) {
  const bf = (t) => job.tensors[t]?.dtype === "bfloat16";
  let compared = 0;
  for (const stage of job.stages) {
    if (stage.op === "barrier" || stage.op === "compute") continue;
    const names = stage.inputs ?? [stage.input];
    const dtype = job.tensors[names[0]].dtype;
    const load = (r, file) => readNpy(path.join(dir, stage.id, `rank${r}.${file}.npy`), { bfloat16: bf(names[0]) }).values;
    for (let r = 0; r < W; r++) {
      let want;
      if (stage.coalesced) {
        want = names.flatMap((_, k) => {
          const xs = Array.from({ length: W }, (_, s) => load(s, `input${names.length > 1 ? k : ""}`));
          return expected({ op: "reduce_scatter", reduce: stage.reduce }, r, W, xs, dtype);
        });
      } else {
        want = expected(stage, r, W, Array.from({ length: W }, (_, s) => load(s, "input")), dtype);
      }
      const got = load(r, "output");
      assert.equal(got.length, want.length, `${stage.id} rank ${r}: output length`);
      for (let i = 0; i < want.length; i++) {
        if (got[i] !== want[i]) assert.fail(`${stage.id} (W=${W}) rank ${r} element ${i}: got ${got[i]}, want ${want[i]}`);
      }
      compared += want.length;
    }
  }
  return compared;
}

/** Writes the job to a fresh directory; run() starts W ranks on it, dumping into dir/dump if asked. */
function prepareJob(W, job, { dump = false } = {}) {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-matrix-"));
  const jobFile = path.join(dir, "job.json");
  writeFileSync(jobFile, JSON.stringify(job));
  const json = path.join(dir, "result.json");
  const dumpDir = path.join(dir, "dump");
  const args = [jobFile, "--json", json, "--out", path.join(dir, "runs"), "--quiet", ...(dump ? ["--dump-dir", dumpDir] : [])];
  return { dir, json, dumpDir, run: () => runRanks(W, args) };
}

for (const W of WORLDS) {
  test(`every stage, counts 0/1/7/1003, every dtype and reduction, W=${W}: exact element by element`, async () => {
    const job = smallJob(W);
    const { dir, json, dumpDir, run } = prepareJob(W, job, { dump: true });
    try {
      const ranks = await run();
      ranks.forEach((p, r) => assert.equal(p.code, 0, `rank ${r} exited ${p.code}: ${p.stderr}`));
      const doc = JSON.parse(readFileSync(json, "utf8"));
      assert.equal(doc.world_size, W);
      assert.equal(doc.results.length, job.stages.length);
      for (const row of doc.results) if (row.type) assert.equal(row.wrong, 0, `${row.stage}: runner's check found ${row.wrong} wrong`);
      const compared = verifyDumps(job, W, dumpDir);
      assert.ok(compared > 1000 * W, `compared only ${compared} elements`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test(`every stage at count 1000003, W=${W}: runner's element-by-element check finds 0 wrong`, async () => {
    const job = bigJob(W);
    const { dir, json, run } = prepareJob(W, job);
    try {
      const ranks = await run();
      ranks.forEach((p, r) => assert.equal(p.code, 0, `rank ${r} exited ${p.code}: ${p.stderr}`));
      const doc = JSON.parse(readFileSync(json, "utf8"));
      assert.equal(doc.results.length, job.stages.length);
      for (const row of doc.results) {
        assert.equal(row.wrong, 0, `${row.stage}: ${row.wrong} wrong`);
        assert.ok(row.time.avg_us > 0, `${row.stage}: no time`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}
