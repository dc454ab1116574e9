// compressed_allreduce (1-bit with error feedback, DESIGN.md steps 1–4): a reference written from the design
// alone, and running jobs whose dumps are compared with it (onebit.test.js; large.test.js at 4Mi and 16Mi).
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { readNpy } from "./npy.js";
import { runRanks } from "./ranks.js";

// --- the reference ---------------------------------------------------------------------------------------

const sign = (v) => (v >= 0 ? 1 : -1);
// Plain loops here and for the output, not typed arrays' from() with a callback: the reference of 2 steps at
// W = 3 over 16Mi elements took 108 s that way and 8 s this way (beside a CI run), the same values.
function signsOf(x) {
  const out = new Int8Array(x.length);
  for (let i = 0; i < x.length; i++) out[i] = sign(x[i]);
  return out;
}
export const sumSquares = (a) => a.reduce((s, v) => s + v * v, 0);

/**
 * Runs `steps` steps of DESIGN.md's compressed_allreduce on W ranks' inputs (plain number arrays) in
 * float64, and returns what every rank holds after the last one: { out, worker[r], server[r] }.
 *
 * `round` is applied wherever the algorithm keeps a value in its compute type: Math.fround for float32
 * (and float16/bfloat16) tensors, identity for float64. Without it the comparison could not be
 * element-wise: a sign is a discontinuous function, and over a million elements some x lands within a
 * rounding error of zero, where a pure float64 run and a float32 run legitimately pick different signs and
 * then carry different errors forever after. With it, every value here is the float32 (or float64) value
 * the native code must produce, up to the order of the sums of squares (done in float64 both here and
 * there, so they agree to ~1e-16 relative before the scale is rounded).
 *
 * The server adds its W received chunks in rank order: c = server_error + (s_0/W)·sign_0 + (s_1/W)·sign_1
 * + …, rounding after each addition, which is (1/W)·Σ_j s_j·sign_j + server_error in that order.
 */
export function reference(inputs, steps, { round = Math.fround, resetEvery = 0 } = {}) {
  const W = inputs.length, n = inputs[0].length;
  const P = Math.ceil(n / (8 * W)) * 8 * W, L = P / W;
  const worker = inputs.map(() => new Float64Array(P));
  const server = inputs.map(() => new Float64Array(L));
  let serverSigns, serverScales;  // the last step's: the output is theirs alone
  for (let t = 0; t < steps; t++) {
    if (resetEvery > 0 && t > 0 && t % resetEvery === 0) [...worker, ...server].forEach((e) => e.fill(0));
    // 1. x = pad(input) + worker_error; s_w = ‖x‖/√P; worker_error = x − s_w·sign(x).
    const signs = [], scales = [];
    worker.forEach((x, r) => {
      for (let i = 0; i < n; i++) x[i] = round(inputs[r][i] + x[i]);
      const s = round(Math.sqrt(sumSquares(x) / P));
      signs.push(signsOf(x));
      for (let i = 0; i < P; i++) x[i] = round(x[i] - s * sign(x[i]));
      scales.push(s);
    });
    // 2.–3. rank i gets chunk i of every rank's signs and every scale; c = (1/W)·Σ_j s_j·sign_j + server_error.
    serverSigns = [], serverScales = [];
    server.forEach((c, i) => {
      for (let j = 0; j < W; j++) {
        const w = round(scales[j] / W);
        for (let e = 0; e < L; e++) c[e] = round(c[e] + w * signs[j][i * L + e]);
      }
      const s = round(Math.sqrt(sumSquares(c) / L));
      serverSigns.push(signsOf(c));
      for (let e = 0; e < L; e++) c[e] = round(c[e] - s * sign(c[e]));
      serverScales.push(s);
    });
  }
  // 4. chunk j of the output is s_s(j)·sign_j, trimmed to n.
  const out = new Float64Array(n);
  for (let k = 0; k < n; k++) out[k] = serverScales[Math.floor(k / L)] * serverSigns[Math.floor(k / L)][k % L];
  return { out, worker, server, P };
}

// --- running jobs ----------------------------------------------------------------------------------------

export const normal = (seed) => ({ kind: "normal", seed });

/**
 * Runs the job on W ranks in a fresh directory and returns the result document and the dumps of its stages
 * (file(stage, rank, what) gives the values). The dumps come from --dump-dir, or with `stageDumpDir` from
 * each stage's own dumpDir option; `typed`: float values as typed arrays (dumps of millions of elements);
 * `extraArgs`: more of the runner's flags (a backend).
 */
export async function runJob(W, job, { stageDumpDir = false, typed = false, extraArgs = [] } = {}) {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-onebit-"));
  try {
    const dumpDir = path.join(dir, "dump");
    if (stageDumpDir) job = { ...job, stages: job.stages.map((s) => ({ ...s, dumpDir })) };
    const jobFile = path.join(dir, "job.json");
    writeFileSync(jobFile, JSON.stringify(job));
    const json = path.join(dir, "result.json");
    const args = [jobFile, "--json", json, "--out", path.join(dir, "runs"), "--quiet", ...(stageDumpDir ? [] : ["--dump-dir", dumpDir]), ...extraArgs];
    const ranks = await runRanks(W, args);
    ranks.forEach((p, r) => assert.equal(p.code, 0, `rank ${r} exited ${p.code}: ${p.stderr}`));
    const doc = JSON.parse(readFileSync(json, "utf8"));
    const files = {};
    for (const stage of job.stages) {
      for (let r = 0; r < W; r++) {
        for (const what of ["input", "output", "worker_error", "server_error"]) {
          files[`${stage.id}/${r}/${what}`] = readNpy(path.join(dumpDir, stage.id, `rank${r}.${what}.npy`), { bfloat16: true, typed }).values;
        }
      }
    }
    return { doc, file: (stage, r, what) => files[`${stage}/${r}/${what}`] };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Element-wise comparison to `ulps` units of the largest value's last place (float32: 2^-24 relative). */
function assertClose(got, want, what, { eps = 2 ** -24, ulps = 2 } = {}) {
  assert.equal(got.length, want.length, `${what}: length`);
  const scale = want.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
  const tol = ulps * eps * scale;
  let worst = 0, at = -1;
  for (let i = 0; i < want.length; i++) {
    const d = Math.abs(got[i] - want[i]);
    if (!(d <= worst)) [worst, at] = [d, i];
  }
  if (!(worst <= tol)) assert.fail(`${what}: element ${at} is ${got[at]}, want ${want[at]} (tolerance ${tol})`);
}

/**
 * The dumps of one compressed stage on W ranks against the reference run over the same steps. `outRound`
 * rounds the reference's output to the tensor's dtype where that is narrower than the compute type.
 */
export function verifyStage(file, stage, W, steps, { outRound = (v) => v, ...options } = {}) {
  const inputs = Array.from({ length: W }, (_, r) => file(stage, r, "input"));
  const ref = reference(inputs, steps, options);
  for (let r = 0; r < W; r++) {
    assertClose(file(stage, r, "output"), ref.out.map(outRound), `${stage} rank ${r} output`, options);
    assertClose(file(stage, r, "worker_error"), ref.worker[r], `${stage} rank ${r} worker_error`, options);
    assertClose(file(stage, r, "server_error"), ref.server[r], `${stage} rank ${r} server_error`, options);
  }
  return ref;
}
