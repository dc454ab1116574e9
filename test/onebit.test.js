// compressed_allreduce (1-bit with error feedback, DESIGN.md steps 1–4) against a reference written here
// from the design alone: outputs and both error buffers, read back from the ranks' .npy dumps, over several
// steps (so the carried errors are compared too), plus its report fields, zero's sign, non-finite input
// and what error feedback buys: the running mean of the outputs converging to the exact mean.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { formatTable } from "../dist/report/table.js";
import { toBfloat16 } from "./helpers/float.js";
import { normal, reference, runJob, sumSquares, verifyStage } from "./helpers/onebit.js";
import { assertSame } from "./helpers/qgz.js";
import { RUNNER, runNode, runRanks } from "./helpers/ranks.js";

// --- the tests --------------------------------------------------------------------------------------------

for (const W of [1, 2, 3, 4, 8]) {
  test(`compressed_allreduce matches the reference, W=${W}, lengths 1/7/8W-1/1000003, 3 steps`, async () => {
    const lengths = [...new Set([1, 7, 8 * W - 1, 1000003])];
    const tensors = Object.fromEntries(lengths.map((n) => [`t${n}`, { dtype: "float32", count: n, fill: normal(100 + n) }]));
    const stages = lengths.map((n) => ({ id: `c${n}`, op: "compressed_allreduce", input: `t${n}` }));
    const job = { name: `onebit-${W}`, warmup: 1, iterations: 2, tensors, stages };
    const { doc, file } = await runJob(W, job);
    for (const n of lengths) {
      const ref = verifyStage(file, `c${n}`, W, 3);
      const row = doc.results.find((r) => r.stage === `c${n}`);
      // Both phases send one record (the packed chunk plus a float32 scale) to each of the W−1 peers.
      assert.equal(row.wire_bytes, 2 * (W - 1) * (ref.P / (8 * W) + 4), `c${n}: wire bytes`);
      assert.equal(row.size, 4 * n);
      assert.equal(row.redop, "mean");
      assert.equal(row.wrong, null);
      assert.ok(Math.abs(row.busbw - row.algbw * (2 * (W - 1)) / W) <= 1e-9 * row.algbw, "logical busbw of an allreduce");
      assert.equal(row.rel_error_by_step.length, 3, "warmup steps count");
      assert.equal(row.rel_error, row.rel_error_by_step[2]);
      // Against what an exact ring allreduce sends, 2(W−1)/W of the array: about 32× for long tensors.
      if (W > 1) assert.ok(Math.abs(row.compression_ratio - Math.round((8 * n * (W - 1)) / W) / row.wire_bytes) < 1e-12, `c${n}: compression ratio`);
      else assert.equal(row.compression_ratio, null);
      // The runner's own error against the exact mean, recomputed from the dumps.
      const mean = Array.from({ length: n }, (_, i) => Array.from({ length: W }, (_, r) => file(`c${n}`, r, "input")[i]).reduce((a, b) => a + b) / W);
      const err = Math.sqrt(sumSquares(ref.out.map((v, i) => v - mean[i])) / sumSquares(mean));
      assert.ok(Math.abs(row.rel_error - err) <= 1e-6 * err, `c${n}: rel_error ${row.rel_error}, recomputed ${err}`);
    }
  });
}

test("resetEvery zeroes both errors every k steps; float64 and bfloat16 tensors; dumps from a stage's dumpDir", async () => {
  const W = 3, n = 1001;
  const job = {
    name: "onebit-options", warmup: 2, iterations: 3,
    tensors: {
      f: { dtype: "float32", count: n, fill: normal(5) },
      d: { dtype: "float64", count: n, fill: normal(6) },
      b: { dtype: "bfloat16", count: n, fill: normal(7) },
    },
    stages: [
      { id: "reset", op: "compressed_allreduce", input: "f", resetEvery: 2 },
      { id: "f64", op: "compressed_allreduce", input: "d" },
      { id: "bf16", op: "compressed_allreduce", input: "b" },
    ],
  };
  const { doc, file } = await runJob(W, job, { stageDumpDir: true });
  verifyStage(file, "reset", W, 5, { resetEvery: 2 });
  // float64 is computed in float64: the reference rounds nowhere, and only the sums' order differs.
  verifyStage(file, "f64", W, 5, { round: (v) => v, eps: 2 ** -53, ulps: 64 });
  // bfloat16 is computed in float32 (errors in float32), the output rounded to bfloat16.
  verifyStage(file, "bf16", W, 5, { outRound: toBfloat16 });
  const P = 1008; // 1001 rounded up to a multiple of 8·3
  assert.equal(doc.results.find((r) => r.stage === "f64").wire_bytes, 2 * (W - 1) * (P / (8 * W) + 8), "float64 scales are 8 bytes");
  assert.equal(doc.results.find((r) => r.stage === "bf16").wire_bytes, 2 * (W - 1) * (P / (8 * W) + 4));
});

// The pipelined form (pieces of every rank's chunk, a helper thread packing, summing and unpacking while the
// lane moves) against one piece, value for value (Object.is, so -0 too): outputs and both errors after 4 steps
// with a reset between. Chunks of 5008 (float32, padded), 5000 (float64) and 4992 (bfloat16) values in pieces
// of 2048, the CPU kernels' tile: 3 pieces, the last short, so the server's sum of squares crosses pieces.
for (const backend of ["shm", "tcp"]) {
  test(`compressed_allreduce in pieces gives the values of one piece exactly, ${backend}, W=3`, async () => {
    const W = 3;
    const tensors = {
      f: { dtype: "float32", count: 15001, fill: normal(40) },
      d: { dtype: "float64", count: 15000, fill: normal(41) },
      b: { dtype: "bfloat16", count: 14976, fill: normal(42) },
    };
    const stages = Object.keys(tensors).flatMap((t) =>
      [["pieces", 2048], ["whole", 2 ** 40]].map(([form, pieceValues]) => ({ id: `${t}-${form}`, op: "compressed_allreduce", input: t, pieceValues, resetEvery: 3 })),
    );
    const { file } = await runJob(W, { name: `onebit-pieces-${backend}`, warmup: 1, iterations: 3, tensors, stages }, { extraArgs: ["--backend", backend] });
    for (const t of Object.keys(tensors)) {
      for (let r = 0; r < W; r++) {
        for (const what of ["output", "worker_error", "server_error"]) {
          const whole = file(`${t}-whole`, r, what);
          assert.ok(whole?.length > 0, `${t} rank ${r}: no ${what}`);
          assertSame(file(`${t}-pieces`, r, what), whole, `${t} rank ${r}: ${what}`);
        }
      }
    }
  });
}

test("zero maps to +1: a zero element (input or padding) leaves worker error −s_w", async () => {
  const W = 2, n = 61; // padded to 64: three padding zeros per rank
  const job = {
    name: "onebit-zero", warmup: 0, iterations: 1,
    tensors: { t: { dtype: "float32", count: n, fill: { kind: "integers", seed: 3, low: -2, high: 2 } } },
    stages: [{ id: "c", op: "compressed_allreduce", input: "t" }],
  };
  const { file } = await runJob(W, job);
  let zeros = 0;
  for (let r = 0; r < W; r++) {
    const x = [...file("c", r, "input"), 0, 0, 0];
    const s = Math.fround(Math.sqrt(sumSquares(x) / x.length));
    const error = file("c", r, "worker_error");
    x.forEach((v, i) => {
      if (v !== 0) return;
      zeros++;
      // sign(0) = +1, so the error is 0 − s·(+1); sign(0) = −1 would give +s.
      assert.equal(error[i], -s, `rank ${r} element ${i}`);
    });
  }
  assert.ok(zeros > 2 * W, `only ${zeros} zeros`);
});

test("a non-finite input fails every rank with a message naming the rank, without waiting for the deadline", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-onebit-inf-"));
  try {
    // float32 cannot hold most draws of a normal with std 1e39: they become ±Infinity. With seed 1 on three
    // ranks some ranks' single element does and some do not.
    const job = {
      name: "onebit-inf", warmup: 0, iterations: 1,
      tensors: { t: { dtype: "float32", count: 1, fill: { kind: "normal", seed: 1, std: 1e39 } } },
      stages: [{ id: "c", op: "compressed_allreduce", input: "t" }],
    };
    const jobFile = path.join(dir, "job.json");
    writeFileSync(jobFile, JSON.stringify(job));
    const started = Date.now();
    const ranks = await runRanks(3, [jobFile, "--out", path.join(dir, "runs"), "--quiet", "--timeout", "60"]);
    // Which failing rank's abort reaches the others first is a race; every rank names one of them.
    ranks.forEach((p, r) => {
      assert.equal(p.code, 1, `rank ${r} exited ${p.code}: ${p.stderr}`);
      assert.match(p.stderr, /stage c: .*compressed_allreduce: rank \d's input holds NaN or infinite values/, `rank ${r}`);
    });
    const own = ranks.filter((p, r) => p.stderr.includes(`compressed_allreduce: rank ${r}'s input`));
    assert.ok(own.length > 0, "a rank with a non-finite input reports it itself");
    assert.ok(Date.now() - started < 30_000, "the failure reached every rank long before the 60 s deadline");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("error feedback: over 100 steps of one input the running mean of the outputs converges to the exact mean", async () => {
  // Why it must, exactly: write C(v) = s·sign(v) for either compression. For every element and step t,
  //   worker r:  x = g_r + e_r(t−1),  e_r(t) = x − C(x)           ⇒  C(x) = g_r + e_r(t−1) − e_r(t)
  //   server:    c = (1/W)·Σ_r C(x_r) + E(t−1),  out(t) = C(c) = c − E(t)
  //   ⇒ out(t) = m + ē(t−1) − ē(t),  with m = (1/W)·Σ_r g_r the exact mean and ē = (1/W)·Σ_r e_r + E.
  // Summed over t = 1..k from zero errors, the sum telescopes:
  //   (1/k)·Σ_t out(t) − m = −ē(k)/k,  so  running_mean_rel_error(k) = ‖ē(k)‖ / (k·‖m‖).
  // The running mean therefore converges like 1/k as long as the error buffers stay bounded. They do, but
  // grow slowly at first: each element behaves like a sigma-delta modulator whose error keeps growing
  // while the scale is below |g_i|, and the scale only grows with the error norm — so ‖ē‖ creeps up by a
  // small factor (of order √(2 ln P) at most, the largest |g_i| over the rms) rather than staying flat.
  // Asserted: the identity, from the dumped buffers, to float32 rounding accumulated over 100 steps; and
  // the bound it gives, with ‖ē(k)‖ at most doubling from step 10 to step 100 (so the error falls ≥ 5×).
  // Without error feedback (resetEvery: 1 zeroes the errors every step) every step repeats the same
  // estimate, so the running mean never improves on the first step's error.
  const W = 4, n = 10000, k = 100;
  const job = {
    name: "onebit-converge", warmup: 0, iterations: k,
    tensors: { g: { dtype: "float32", count: n, fill: normal(11) } },
    stages: [
      { id: "ef", op: "compressed_allreduce", input: "g" },
      { id: "noef", op: "compressed_allreduce", input: "g", resetEvery: 1 },
    ],
  };
  const { doc, file } = await runJob(W, job);
  const ef = doc.results.find((r) => r.stage === "ef");
  const noef = doc.results.find((r) => r.stage === "noef");
  const inputs = Array.from({ length: W }, (_, r) => file("ef", r, "input"));
  const m = Array.from({ length: n }, (_, i) => inputs.reduce((s, g) => s + g[i], 0) / W);
  // ē over the first n elements: the mean of the worker errors plus the server errors, chunk j from rank j.
  const server = Array.from({ length: W }, (_, r) => file("ef", r, "server_error")).flat();
  const eBar = m.map((_, i) => inputs.reduce((s, _g, r) => s + file("ef", r, "worker_error")[i], 0) / W + server[i]);
  const identity = Math.sqrt(sumSquares(eBar) / sumSquares(m)) / k;
  const running = ef.running_mean_rel_error_by_step;
  assert.equal(running.length, k);
  assert.equal(ef.running_mean_rel_error, running[k - 1]);
  assert.ok(Math.abs(running[k - 1] - identity) <= 1e-3 * identity, `running mean error ${running[k - 1]}, ‖ē‖/(k‖m‖) = ${identity}`);
  assert.ok(k * running[k - 1] <= 2 * 10 * running[9], `‖ē‖ grew from ${10 * running[9]} to ${k * running[k - 1]} (×‖m‖)`);
  assert.ok(running[k - 1] <= running[9] / 5 && running[k - 1] < 0.1, `running mean error ${running[9]} at 10 steps, ${running[k - 1]} at ${k}`);
  // Each single step stays a rough estimate: error feedback improves the average, not the step.
  assert.ok(ef.rel_error > 0.5, `one step's error ${ef.rel_error}`);
  // Without feedback, the same estimate every step.
  for (const e of noef.running_mean_rel_error_by_step) assert.ok(Math.abs(e - noef.rel_error_by_step[0]) <= 1e-6 * e);
  assert.ok(running[k - 1] * 10 < noef.running_mean_rel_error, "error feedback beats none by more than 10×");
});

test("validate: compressed_allreduce needs a floating-point tensor", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-onebit-validate-"));
  try {
    const jobFile = path.join(dir, "job.json");
    const job = { name: "v", tensors: { i: { dtype: "int32", count: 8 } }, stages: [{ id: "c", op: "compressed_allreduce", input: "i" }] };
    writeFileSync(jobFile, JSON.stringify(job));
    const p = await runNode([RUNNER, "validate", jobFile]);
    assert.equal(p.code, 2, p.stderr);
    assert.match(p.stderr, /stages\[0\]\.input: compressed_allreduce needs a floating-point tensor but "i" is int32/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the table shows rel_error and wire bytes in their own columns, rel_error N/A on exact rows", () => {
  const time = { avg_us: 10, p50_us: 10, p95_us: 10, min_us: 10, max_us: 10 };
  const row = { size: 4096, count: 1024, type: "float32", redop: "mean", root: null, algorithm: "auto", time, algbw: 0.4, busbw: 0.6, wrong: null };
  const table = formatTable({
    version: "0", job: "t", world_size: 4, backend: "shm", average_bus_bandwidth: 0.6,
    results: [
      { ...row, stage: "exact", op: "allreduce", algorithm: "ring", wrong: 0, wire_bytes: 6144, rel_error: null },
      { ...row, stage: "onebit", op: "compressed_allreduce", wire_bytes: 264, rel_error: 0.8961 },
    ],
  });
  const lines = table.split("\n");
  assert.match(lines[2], /#wrong +rel_err +wire$/);
  assert.match(lines.find((l) => l.includes("exact")), / 0 +N\/A +6144$/);
  assert.match(lines.find((l) => l.includes("onebit")), / N\/A +8\.96e-1 +264$/);
});
