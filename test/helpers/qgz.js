// A model of quantized_allreduce written from DESIGN.md (Stages, quantized_allreduce) alone, in float64 that
// rounds every operation to float32 with Math.fround where the native code computes in float32. That is
// what lets a test compare outputs and error buffers element by element, exactly: round-half-even decides
// ties, and a value a rounding error away from a tie would otherwise round the other way and leave every
// later sum different. (Division and multiplication of float32 values done in float64 and then rounded
// give the correctly rounded float32 result, so Math.fround(a / b) is float32's a / b.)
//
// For the stages without error feedback it also returns, per output element, a bound on how far the
// result may be from the exact reduction of the float32 inputs in plain float64, derived from the steps:
// a value quantized with step s is off by at most s/2, or s when it is the group's +absmax (x/s = 2^(b-1)
// clamps to 2^(b-1) - 1); every rank's quantization adds its error to the sum once, every node's
// requantization once, and (full output) the gather's once; float32 rounding adds a few 2^-24 relative.

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import path from "node:path";
import { readNpy } from "./npy.js";

const f32 = Math.fround;

/** Round to nearest, ties to even (Math.round sends ties up). */
export function roundHalfEven(v) {
  const r = Math.round(v);
  return r - v === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/**
 * DESIGN.md's quantization of one block of float32 values in groups of g: step = absmax / 2^(b-1) (1 for
 * absmax 0), q = clamp(rhe(x / step)). With `feedback` ({ error, beta }: a Float64Array view and the weight)
 * the values quantized are x + beta·error and error becomes what that lost.
 */
export function quantizeBlock(x, bits, g, feedback) {
  const half = 2 ** (bits - 1);
  const y = feedback ? x.map((v, i) => f32(v + f32(feedback.beta * feedback.error[i]))) : x;
  const steps = [], codes = [], values = [];
  for (let at = 0; at < y.length; at += g) {
    const group = y.slice(at, at + g);
    const absmax = group.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    const step = absmax === 0 ? 1 : f32(absmax / half);
    steps.push(step);
    for (const v of group) {
      // + 0: a code is an integer, with no -0 (Math.round(-0.3) is -0), so 0·step is +0 as in native code.
      const q = Math.min(Math.max(roundHalfEven(f32(v / step)), -half), half - 1) + 0;
      codes.push(q);
      values.push(f32(q * step));
    }
  }
  if (feedback) y.forEach((v, i) => (feedback.error[i] = f32(v - values[i])));
  return { steps, codes, values };
}

/** Element-wise sum of arrays in order, rounding after each addition. */
function sumInOrder(arrays) {
  const acc = arrays[0].slice();
  for (const a of arrays.slice(1)) a.forEach((v, i) => (acc[i] = f32(acc[i] + v)));
  return acc;
}

const range = (n) => Array.from({ length: n }, (_, i) => i);
const stepOf = (q, k, g) => q.steps[Math.floor(k / g)];

/**
 * Which rank is local index l of node a: `nodeOf` (each rank's node, as the hosts say; local indices in rank
 * order), or N = W/L nodes of L ranks numbered node by node (rank = node·L + local).
 */
function layoutOf(W, L, nodeOf) {
  const node = nodeOf ?? range(W).map((r) => Math.floor(r / L));
  const members = [];
  node.forEach((a, r) => (members[a] ??= []).push(r));
  return { N: members.length, L: members[0].length, at: (a, l) => members[a][l], node: (r) => node[r], local: (r) => members[node[r]].indexOf(r) };
}

/**
 * Runs `steps` steps on W ranks' inputs (arrays of float32 values) with N nodes of L ranks (layoutOf) and
 * returns what every rank holds after the last: { outs[r], state[r] } with state's intra/inter/gather errors
 * (Float64Arrays, or null without feedback), and without feedback bounds[r]: for each output element, how
 * far it may be from the exact result.
 */
export function qgzReference(inputs, { L: localSize, nodeOf, bits = 8, gatherBits = bits, groupSize: g, reduce = "sum", output = "shard", beta = null, steps = 1 }) {
  const W = inputs.length, n = inputs[0].length, B = n / W;
  const { N, L, at, node, local } = layoutOf(W, localSize, nodeOf);
  const block = (a, j) => a.slice(j * B, (j + 1) * B);
  const errors = (len) => (beta === null ? null : new Float64Array(len));
  const state = inputs.map(() => ({ intra: errors(n), inter: errors(N * B), gather: output === "full" ? errors(B) : null }));
  const feedback = (e, at) => e && { error: e.subarray(at, at + B), beta: f32(beta) };
  const divide = reduce === "mean" ? W : 1;
  let result;
  for (let t = 0; t < steps; t++) {
    // 1. every rank quantizes every block j.
    const q1 = inputs.map((x, r) => range(W).map((j) => quantizeBlock(block(x, j), bits, g, feedback(state[r].intra, j * B))));
    // 2. rank (a, l), for each node a2: its node's L copies of the block bound for (a2, l), summed in local order, requantized.
    const q2 = inputs.map((_, r) => {
      const a = node(r), l = local(r);
      return range(N).map((a2) => quantizeBlock(sumInOrder(range(L).map((l2) => q1[at(a, l2)][at(a2, l)].values)), bits, g, feedback(state[r].inter, a2 * B)));
    });
    // 3. rank r: every node's requantized sum of block r, in node order; the mean divides once at the end.
    const reduced = inputs.map((_, r) => {
      const a = node(r), l = local(r);
      const sum = sumInOrder(range(N).map((a2) => q2[at(a2, l)][a].values));
      return divide === 1 ? sum : sum.map((v) => f32(v / divide));
    });
    // How far block r may be from the exact result: every rank's and every node's quantization error.
    const blockBound = (r) => {
      const a = node(r), l = local(r);
      return range(B).map((k) => {
        const quantized = range(W).reduce((s, r2) => s + stepOf(q1[r2][r], k, g), 0) + range(N).reduce((s, a2) => s + stepOf(q2[at(a2, l)][a], k, g), 0);
        const magnitude = range(W).reduce((s, r2) => s + Math.abs(inputs[r2][r * B + k]), 0) + quantized;
        return (quantized + 2 ** -20 * magnitude) / divide;
      });
    };
    if (output === "shard") {
      result = { outs: reduced, bounds: inputs.map((_, r) => blockBound(r)) };
    } else {
      // 4. every rank quantizes its block, and every rank gets every block back.
      const q3 = reduced.map((b, r) => quantizeBlock(b, gatherBits, g, state[r].gather && { error: state[r].gather, beta: f32(beta) }));
      const all = q3.flatMap((q) => q.values);
      const bound = q3.flatMap((q, r) => blockBound(r).map((e, k) => e + stepOf(q, k, g)));
      result = { outs: inputs.map(() => all), bounds: inputs.map(() => bound) };
    }
  }
  return { ...result, bounds: beta === null ? result.bounds : null, state };
}

/** The exact reduction in float64 of the float32 inputs: block r of it, or all of it. */
export function exactReduction(inputs, { reduce = "sum", output = "shard" }, r) {
  const W = inputs.length, n = inputs[0].length, B = n / W;
  const all = range(n).map((i) => inputs.reduce((s, x) => s + f32(x[i]), 0) / (reduce === "mean" ? W : 1));
  return output === "full" ? all : all.slice(r * B, (r + 1) * B);
}

/** Bytes one rank sends per step: a record of N blocks to each other local rank, a block to each other node, a block to every rank (full). */
export function qgzWireBytes({ W, L, n, bits = 8, gatherBits = bits, groupSize: g, output = "shard" }) {
  const N = W / L, B = n / W;
  const blockBytes = (b) => 4 * Math.ceil(B / g) + (B * b) / 8;
  return (L - 1) * N * blockBytes(bits) + (N - 1) * blockBytes(bits) + (output === "full" ? (W - 1) * blockBytes(gatherBits) : 0);
}

const STATE = ["intra_error", "inter_error", "gather_error"];

/** The .npy dumps of every stage on W ranks: file(stage, rank, what) gives its values, or undefined where there is none. */
export function readDumps(job, W, dumpDir) {
  const files = new Map();
  for (const stage of job.stages) {
    for (let r = 0; r < W; r++) {
      for (const what of ["input", "output", ...STATE]) {
        const file = path.join(dumpDir, stage.id, `rank${r}.${what}.npy`);
        if (existsSync(file)) files.set(`${stage.id}/${r}/${what}`, readNpy(file, { bfloat16: true }).values);
      }
    }
  }
  return (stage, r, what) => files.get(`${stage}/${r}/${what}`);
}

export function assertSame(got, want, what) {
  assert.ok(got, `${what}: no dump`);
  assert.equal(got.length, want.length, `${what}: length`);
  // Object.is: -0 and +0 differ too.
  for (let i = 0; i < want.length; i++) if (!Object.is(got[i], want[i])) assert.fail(`${what}: element ${i} is ${got[i]}, want ${want[i]}`);
}

/**
 * One stage's dumps on W ranks against the model run over the same steps (`o`: the stage's options as the
 * model takes them: L the ranks per node, or nodeOf each rank's node), then its row: wire bytes, logical busbw, compression ratio,
 * rel_error recomputed from the dumps. Returns the row.
 */
export function verifyStage(doc, file, id, W, steps, o, { outRound = (v) => v } = {}) {
  const inputs = Array.from({ length: W }, (_, r) => file(id, r, "input"));
  const ref = qgzReference(inputs, { ...o, steps });
  for (let r = 0; r < W; r++) {
    assertSame(file(id, r, "output"), ref.outs[r].map(outRound), `${id} rank ${r} output`);
    for (const [what, key] of [["intra_error", "intra"], ["inter_error", "inter"], ["gather_error", "gather"]]) {
      if (ref.state[r][key]) assertSame(file(id, r, what), Array.from(ref.state[r][key]), `${id} rank ${r} ${what}`);
      else assert.equal(file(id, r, what), undefined, `${id} rank ${r}: no ${what} without error feedback`);
    }
  }
  // The model against the exact reduction, within the quantization bound it derives (no feedback only:
  // feedback deliberately adds last step's error to this step's values).
  if (ref.bounds) {
    for (let r = 0; r < W; r++) {
      const exact = exactReduction(inputs, o, r);
      exact.forEach((v, i) => {
        const d = Math.abs(ref.outs[r][i] - v);
        if (!(d <= ref.bounds[r][i])) assert.fail(`${id} rank ${r} element ${i}: ${ref.outs[r][i]} is ${d} from ${v}, bound ${ref.bounds[r][i]}`);
      });
    }
  }
  const row = doc.results.find((x) => x.stage === id);
  const n = inputs[0].length, full = o.output === "full";
  assert.equal(row.fallback, null, `${id}: no fallback`);
  assert.equal(row.algorithm, "auto");
  assert.equal(row.redop, o.reduce ?? "sum");
  assert.equal(row.wrong, null);
  assert.equal(row.wire_bytes, qgzWireBytes({ W, n, ...o }), `${id}: wire bytes`);
  const factor = full ? (2 * (W - 1)) / W : (W - 1) / W;
  assert.ok(Math.abs(row.busbw - row.algbw * factor) <= 1e-9 * row.algbw, `${id}: logical busbw of the exact collective`);
  assert.ok(Math.abs(row.compression_ratio - Math.round(row.size * factor) / row.wire_bytes) < 1e-12, `${id}: compression ratio`);
  assert.equal(row.rel_error_by_step.length, steps, "warmup steps count");
  assert.equal(row.rel_error, row.rel_error_by_step[steps - 1]);
  // ‖out − exact‖ / ‖exact‖ over the whole array, from the dumps (null where the exact result is 0).
  let errorSq = 0, exactSq = 0;
  for (let r = 0; r < (full ? 1 : W); r++) {
    const exact = exactReduction(inputs, o, r), out = file(id, r, "output");
    exact.forEach((v, i) => ((errorSq += (out[i] - v) ** 2), (exactSq += v * v)));
  }
  if (exactSq === 0) assert.equal(row.rel_error, null);
  else assert.ok(Math.abs(row.rel_error - Math.sqrt(errorSq / exactSq)) <= 1e-9 * row.rel_error + 1e-15, `${id}: rel_error ${row.rel_error}`);
  return row;
}
