// The stage matrix shared by the multi-rank suites: job generators covering every stage, dtype and
// reduction, and a reference for what each rank must end with, written independently of the native code.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { readNpy } from "./npy.js";
import { runRanks } from "./ranks.js";

/**
 * Uneven, rank-dependent all_to_allv counts for W ranks over a tensor of n elements: rank 1 sends nothing,
 * other pairs nothing or something that differs by sender and receiver, and no row sends all of the tensor.
 */
export function vCounts(n, W) {
  return Array.from({ length: W }, (_, i) => {
    const weights = Array.from({ length: W }, (_, j) => (i === 1 ? 0 : (i * 5 + j * 3 + 1) % 4));
    const total = weights.reduce((a, b) => a + b, 0) || 1;
    return weights.map((w) => Math.floor((Math.max(0, n - i) * w) / total));
  });
}

/**
 * Every exact stage over tensor `t`, each algorithm by name. `auto` adds each op once more with the
 * default algorithm: on a library backend (MPI) that is the library's own collective.
 */
export function exactStages(t, W, { big = false, auto = false, n } = {}) {
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
  if (n !== undefined) {
    add("all_to_allv", { input: t, counts: vCounts(n, W) }, ".auto");
    add("all_to_allv", { input: t, counts: vCounts(n, W), algorithm: "direct" }, ".direct");
  }
  add("send_recv", { input: t, shift: 1 }, ".1");
  if (!big) add("send_recv", { input: t, shift: -2 }, ".-2");
  if (auto) {
    add("allreduce", { input: t, reduce: "sum" }, ".auto");
    add("reduce_scatter", { input: t }, ".auto");
    add("all_gather", { input: t }, ".auto");
    add("gather", { input: t, root: last }, ".auto");
    add("broadcast", { input: t, root: last }, ".auto");
    add("reduce", { input: t, root: last, reduce: "sum" }, ".auto");
    add("reduce", { input: t, root: 0, reduce: "max" }, ".auto_max");
    add("scatter", { input: t, root: last }, ".auto");
  }
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

export function smallJob(W, { auto = false } = {}) {
  const tensors = {}, stages = [];
  // 24·W: equal all_to_all blocks (the mpi backend's MPI_Alltoall path); the others leave a remainder.
  for (const n of [0, 1, 7, 1003, 24 * W]) {
    tensors[`f32_${n}`] = { dtype: "float32", count: n, fill: { kind: "integers", seed: n + 11, low: -9, high: 9 } };
    stages.push(...exactStages(`f32_${n}`, W, { auto, n }));
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

export function bigJob(W, { auto = false } = {}) {
  const tensors = { f32_big: { dtype: "float32", count: 1000003, fill: { kind: "integers", seed: 99, low: -9, high: 9 } } };
  return { name: `big-${W}`, iterations: 1, warmup: 0, check: true, tensors, stages: exactStages("f32_big", W, { big: true, auto, n: 1000003 }) };
}

/**
 * The ring allreduce on blocks of several of its 1 MiB slices (native kRingSliceBytes), the last slice and the
 * last block short: 2500007 elements, float32 sum and int64 max in place. The runner's check compares every element.
 */
export function slicedRingJob() {
  const n = 2_500_007;
  const fill = (seed) => ({ kind: "integers", seed, low: -9, high: 9 });
  return {
    name: "ring-slices", iterations: 1, warmup: 1, check: true,
    tensors: { f32_sliced: { dtype: "float32", count: n, fill: fill(5) }, i64_sliced: { dtype: "int64", count: n, fill: fill(6) } },
    stages: [
      { id: "f32.allreduce.ring", op: "allreduce", input: "f32_sliced", reduce: "sum", algorithm: "ring" },
      { id: "i64.allreduce.ring", op: "allreduce", input: "i64_sliced", reduce: "max", algorithm: "ring", inPlace: true },
    ],
  };
}

// --- the reference semantics, written independently of the native code ---
const block = (n, W) => Math.ceil(n / W);
const off = (n, W, i) => Math.min(n, i * block(n, W));
const cnt = (n, W, i) => Math.min(n, off(n, W, i) + block(n, W)) - off(n, W, i);
const round = { float32: Math.fround, float64: (v) => v };

// A stage's inputs (one array per member) reduce to the same reference for every member: made once each.
const reductions = new WeakMap();

function reduceAcross(xs, reduce, dtype, W) {
  const made = reductions.get(xs);
  if (made?.reduce === reduce) return made.values;
  const n = xs[0].length;
  const col = new Array(xs.length);
  const values = Array.from({ length: n }, (_, i) => {
    for (let s = 0; s < xs.length; s++) col[s] = xs[s][i];
    if (reduce === "max") return Math.max(...col);
    if (reduce === "min") return Math.min(...col);
    const sum = col.reduce((a, b) => a + b, 0);
    if (reduce === "mean") return round[dtype](sum / W);
    return dtype === "int32" ? sum | 0 : sum;
  });
  reductions.set(xs, { reduce, values });
  return values;
}

/** Rank r's all_to_allv output: from each rank s in order, s's block for r, after its blocks for ranks before r. */
function allToAllv(counts, r, x) {
  return x.flatMap((xs, s) => {
    const at = counts[s].slice(0, r).reduce((a, b) => a + b, 0);
    return xs.slice(at, at + counts[s][r]);
  });
}

/** `group`: the index of the stage's group holding the rank (0 without groups). */
function expected(stage, r, W, inputs, dtype, group = 0) {
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
    case "all_to_allv": return allToAllv(Array.isArray(stage.counts[0][0]) ? stage.counts[group] : stage.counts, r, x);
  }
  throw new Error(`no reference for ${stage.op}`);
}

/**
 * Every rank's dumped output against the reference. `partitions[name]`: the groups (lists of world ranks) of
 * each group a stage may name; in a group, ranks, roots and the world are the group's.
 */
export function verifyDumps(job, W, dir, partitions = {}) {
  const bf = (t) => job.tensors[t]?.dtype === "bfloat16";
  let compared = 0;
  for (const stage of job.stages) {
    if (stage.op === "barrier" || stage.op === "compute") continue;
    const names = stage.inputs ?? [stage.input];
    const dtype = job.tensors[names[0]].dtype;
    // Outputs are only compared, so float ones stay typed arrays (the same values, without a copy into an Array).
    const load = (r, file, typed = false) => readNpy(path.join(dir, stage.id, `rank${r}.${file}.npy`), { bfloat16: bf(names[0]), typed }).values;
    // Each member's inputs are read once a stage, not once for every rank that compares against them.
    const read = new Map();
    const inputs = (members, file) => {
      const key = `${members}:${file}`;
      if (!read.has(key)) read.set(key, members.map((s) => load(s, file)));
      return read.get(key);
    };
    for (let r = 0; r < W; r++) {
      const group = stage.group ? partitions[stage.group].findIndex((g) => g.includes(r)) : 0;
      const members = stage.group ? partitions[stage.group][group] : Array.from({ length: W }, (_, s) => s);
      const [local, size] = [members.indexOf(r), members.length];
      let want;
      if (stage.coalesced) {
        want = names.flatMap((_, k) => {
          const xs = inputs(members, `input${names.length > 1 ? k : ""}`);
          return expected({ op: "reduce_scatter", reduce: stage.reduce }, local, size, xs, dtype);
        });
      } else {
        want = expected(stage, local, size, inputs(members, "input"), dtype, group);
      }
      const got = load(r, "output", true);
      assert.equal(got.length, want.length, `${stage.id} rank ${r}: output length`);
      for (let i = 0; i < want.length; i++) {
        if (got[i] !== want[i]) assert.fail(`${stage.id} (W=${W}) rank ${r} element ${i}: got ${got[i]}, want ${want[i]}`);
      }
      compared += want.length;
    }
  }
  return compared;
}

/**
 * Writes the job to a fresh directory; run() starts W ranks on it with `launch(W, args)` (default: one
 * process per rank with torchrun-style variables), dumping into dir/dump if asked.
 */
export function prepareJob(W, job, { dump = false, launch = runRanks, extraArgs = [] } = {}) {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-matrix-"));
  const jobFile = path.join(dir, "job.json");
  writeFileSync(jobFile, JSON.stringify(job));
  const json = path.join(dir, "result.json");
  const dumpDir = path.join(dir, "dump");
  const args = [jobFile, "--json", json, "--out", path.join(dir, "runs"), "--quiet", ...(dump ? ["--dump-dir", dumpDir] : []), ...extraArgs];
  return { dir, json, dumpDir, run: () => launch(W, args) };
}
