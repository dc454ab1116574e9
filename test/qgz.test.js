// quantized_allreduce (ZeRO++ qgZ, DESIGN.md) against the float32 model in helpers/qgz.js: every rank's
// output and error buffers, read back from the .npy dumps, element by element and exactly, after several
// steps (so carried errors count too), on every nodes × local-ranks layout of 2, 4 and 8 ranks; every
// result also within the quantization bound of the exact reduction; int8 and int4, sum and mean, shard and
// full output, groups that do not divide a block, all-zero groups, values that clamp; its report fields;
// the fallback to the exact collective; the hosts' grouping where the stage names no layout; validation.
// (Hosts that number their ranks round-robin, for real: mpirun-hosts.test.js.)
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { parseJob } from "../dist/config/load.js";
import { plan } from "../dist/graph/plan.js";
import { validateGraph } from "../dist/graph/validate.js";
import { formatTable } from "../dist/report/table.js";
import { toBfloat16 } from "./helpers/float.js";
import { prepareJob } from "./helpers/matrix.js";
import { assertSame, readDumps, verifyStage } from "./helpers/qgz.js";
import { RUNNER, runNode, runRanks } from "./helpers/ranks.js";

/**
 * Runs the job on W ranks (`env`: extra variables per rank) with dumps; returns the result document, the
 * ranks' processes and file(stage, rank, what): the values of a dump, or undefined where there is none.
 */
async function runJob(W, job, { env = {}, expectFailure = false, extraArgs = [] } = {}) {
  const launch = (w, args) => runRanks(w, args, { env, timeoutMs: 300_000 });
  const { dir, json, dumpDir, run } = prepareJob(W, job, { dump: true, launch, extraArgs });
  try {
    const ranks = await run();
    if (expectFailure) return { ranks };
    ranks.forEach((p, r) => assert.equal(p.code, 0, `rank ${r} exited ${p.code}: ${p.stderr}`));
    return { doc: JSON.parse(readFileSync(json, "utf8")), ranks, file: readDumps(job, W, dumpDir) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const normal = (seed) => ({ kind: "normal", seed });

for (const [N, L] of [[2, 1], [1, 2], [2, 2], [4, 1], [2, 4], [4, 2], [1, 8], [8, 1]]) {
  const W = N * L;
  test(`W=${W} as ${N} nodes × ${L}: int8/int4, sum/mean, shard/full, feedback, zero groups and clamps match the model exactly`, { timeout: 300_000 }, async () => {
    const n = 100 * W; // blocks of 100: groups of 16 and 32 do not divide them
    const job = {
      name: `qgz-${N}x${L}`, warmup: 1, iterations: 2, check: true,
      tensors: {
        g: { dtype: "float32", count: n, fill: normal(20 + W) },
        // rank r holds r everywhere: rank 0's groups are all zero (step 1), the others' values are all
        // +absmax, which clamps to 2^(b-1) - 1.
        r: { dtype: "float32", count: n, fill: { kind: "rank" } },
        odd: { dtype: "float32", count: n + 1, fill: normal(3) },
      },
      stages: [
        { id: "i8", op: "quantized_allreduce", input: "g", nodes: N, localSize: L, groupSize: 16 },
        { id: "i4full", op: "quantized_allreduce", input: "g", bits: 4, reduce: "mean", output: "full", gatherBits: 8, groupSize: 32, nodes: N, errorFeedback: { beta: 0.5 } },
        { id: "zero", op: "quantized_allreduce", input: "r", bits: 4, groupSize: 10, localSize: L },
        { id: "fallback", op: "quantized_allreduce", input: "odd", nodes: N, localSize: L },
      ],
    };
    const { doc, file } = await runJob(W, job);
    verifyStage(doc, file, "i8", W, 3, { L, groupSize: 16 });
    verifyStage(doc, file, "i4full", W, 3, { L, bits: 4, gatherBits: 8, groupSize: 32, reduce: "mean", output: "full", beta: 0.5 });
    verifyStage(doc, file, "zero", W, 3, { L, bits: 4, groupSize: 10 });
    // n + 1 is not a multiple of W: the exact reduce_scatter ran, blocks of ceil((n+1)/W), checked by --check.
    const fb = doc.results.find((x) => x.stage === "fallback");
    assert.equal(fb.fallback, `count ${n + 1} is not a multiple of W = ${W}; ran the exact reduce_scatter`);
    assert.equal(fb.wrong, 0, "the exact reduce_scatter's elements are checked");
    assert.equal(fb.rel_error, null);
    assert.equal(fb.compression_ratio, undefined);
    assert.equal(fb.wire_bytes, Math.round((4 * (n + 1) * (W - 1)) / W));
    assert.equal(file("fallback", W - 1, "output").length, n + 1 - (W - 1) * Math.ceil((n + 1) / W));
  });
}

test("float64 and bfloat16 tensors compute in float32, outputs rounded back; the hosts' grouping when the stage names none", { timeout: 300_000 }, async () => {
  const W = 4, n = 2 * 4 * 50;
  const job = {
    name: "qgz-types", warmup: 0, iterations: 2,
    tensors: { d: { dtype: "float64", count: n, fill: normal(8) }, b: { dtype: "bfloat16", count: n, fill: normal(9) } },
    stages: [
      { id: "f64", op: "quantized_allreduce", input: "d", bits: 4, groupSize: 20, output: "full" },
      { id: "bf16", op: "quantized_allreduce", input: "b", groupSize: 24, reduce: "mean" },
    ],
  };
  // The launcher says two "nodes" of two ranks, but all four ranks share this host: the hosts win (one node
  // of four), and the report says the launcher was contradicted.
  const env = (rank) => ({ LOCAL_RANK: String(rank % 2), LOCAL_WORLD_SIZE: "2" });
  const { doc, file, ranks } = await runJob(W, job, { env });
  verifyStage(doc, file, "f64", W, 2, { L: 4, bits: 4, groupSize: 20, output: "full" });
  verifyStage(doc, file, "bf16", W, 2, { L: 4, groupSize: 24, reduce: "mean" }, { outRound: toBfloat16 });
  assert.match(ranks[0].stderr, /topology: the launcher's variables contradict the hosts the ranks met on, which are used: rank 0 is local rank 0 of 4 on host \S+ \(node 0\), the launcher says local rank 0 of 2;/);
});

test("error feedback: over 30 steps of one input the running mean of the outputs approaches the exact result", { timeout: 300_000 }, async () => {
  // Each quantization's error is carried into the next step, so over k steps the errors telescope: the mean of
  // the outputs misses the exact result by the last step's carried errors over k. Without feedback every step
  // repeats the same estimate.
  const W = 4, k = 30;
  const stage = { op: "quantized_allreduce", input: "g", bits: 4, nodes: 2, groupSize: 64 };
  const job = {
    name: "qgz-feedback", warmup: 0, iterations: k,
    tensors: { g: { dtype: "float32", count: 4000, fill: normal(12) } },
    stages: [{ id: "ef", ...stage, errorFeedback: {} }, { id: "noef", ...stage }],
  };
  const { doc } = await runJob(W, job);
  const [ef, noef] = ["ef", "noef"].map((id) => doc.results.find((x) => x.stage === id));
  for (const e of noef.running_mean_rel_error_by_step) assert.ok(Math.abs(e - noef.rel_error) <= 1e-9, "the same estimate every step");
  assert.ok(ef.running_mean_rel_error * 5 < noef.running_mean_rel_error, `with feedback ${ef.running_mean_rel_error}, without ${noef.running_mean_rel_error}`);
  assert.ok(ef.rel_error < 2 * noef.rel_error, "a single step stays as rough as without feedback");
});

// The pipelined form (pieces of a few groups of every block, a helper thread computing while the lane moves)
// against one piece, value for value (Object.is, so -0 too): outputs and every error buffer after 3 steps, blocks of 1010 in groups of
// 16 (a short last group) and pieces of 5 groups (13 pieces, the last of 50), both hierarchy levels busy.
for (const backend of ["shm", "tcp"]) {
  test(`quantized_allreduce in pieces gives the values of one piece exactly, ${backend}, W=3`, { timeout: 300_000 }, async () => {
    const W = 3, n = 3 * 1010;
    const kinds = {
      full4: { input: "f", bits: 4, reduce: "mean", output: "full", errorFeedback: { beta: 0.5 } },
      shard8: { input: "d", reduce: "sum", errorFeedback: {} },
      bf16: { input: "b", bits: 4, gatherBits: 8, output: "full", errorFeedback: {} },
    };
    const layouts = { across: { nodes: 3 }, within: { localSize: 3 } };
    const stages = [];
    for (const [kind, options] of Object.entries(kinds)) {
      for (const [where, layout] of Object.entries(layouts)) {
        for (const [form, pieceGroups] of [["pieces", 5], ["whole", 2 ** 40]]) {
          stages.push({ id: `${kind}-${where}-${form}`, op: "quantized_allreduce", groupSize: 16, pieceGroups, ...options, ...layout });
        }
      }
    }
    const job = {
      name: `qgz-pieces-${backend}`, warmup: 1, iterations: 2,
      tensors: {
        f: { dtype: "float32", count: n, fill: normal(30) },
        d: { dtype: "float64", count: n, fill: normal(31) },
        b: { dtype: "bfloat16", count: n, fill: normal(32) },
      },
      stages,
    };
    const { file } = await runJob(W, job, { extraArgs: ["--backend", backend] });
    for (const kind of Object.keys(kinds)) {
      for (const where of Object.keys(layouts)) {
        for (let r = 0; r < W; r++) {
          const whats = ["output", "intra_error", "inter_error", ...(kind === "shard8" ? [] : ["gather_error"])];
          for (const what of whats) {
            const pieces = file(`${kind}-${where}-pieces`, r, what), whole = file(`${kind}-${where}-whole`, r, what);
            assert.ok(whole?.length > 0, `${kind} ${where} rank ${r}: no ${what}`);
            assertSame(pieces, whole, `${kind} ${where} rank ${r}: ${what}`);
          }
        }
      }
    }
  });
}

test("a NaN or infinite input fails every rank with a message naming a rank", { timeout: 300_000 }, async () => {
  // float32 cannot hold most draws of a normal with std 1e39: they become ±Infinity.
  const job = {
    name: "qgz-inf", warmup: 0, iterations: 1,
    tensors: { t: { dtype: "float32", count: 8, fill: { kind: "normal", seed: 1, std: 1e39 } } },
    stages: [{ id: "q", op: "quantized_allreduce", input: "t", nodes: 2 }],
  };
  const { ranks } = await runJob(2, job, { expectFailure: true });
  ranks.forEach((p, r) => {
    assert.equal(p.code, 1, `rank ${r} exited ${p.code}: ${p.stderr}`);
    assert.match(p.stderr, /stage q: .*quantized_allreduce: rank \d has NaN or infinite values in its input/, `rank ${r}`);
  });
});

test("validate: node layouts must tile the world, floating-point tensors only, gatherBits only with full output", async () => {
  const tensors = { f: { dtype: "float32", count: 64 }, i: { dtype: "int32", count: 64 } };
  const job = (extra) => ({ name: "v", tensors, stages: [{ id: "q", op: "quantized_allreduce", ...extra }] });
  const cases = [
    [{ input: "f", nodes: 2, localSize: 3 }, /stages\[0\]\.nodes: nodes × localSize = 2 × 3 = 6 must equal the world size 4/],
    [{ input: "f", nodes: 3 }, /stages\[0\]\.nodes: nodes 3 does not divide the world size 4/],
    [{ input: "f", localSize: 8 }, /stages\[0\]\.localSize: localSize 8 does not divide the world size 4/],
    [{ input: "i" }, /stages\[0\]\.input: quantized_allreduce needs a floating-point tensor but "i" is int32/],
    [{ input: "f", gatherBits: 4 }, /stages\[0\]\.gatherBits: "gatherBits" needs "output": "full"/],
    [{ input: "f", groupSize: 7 }, /stages\[0\]\.groupSize/],
    [{ input: "f", bits: 2 }, /stages\[0\]\.bits/],
  ];
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-qgz-validate-"));
  try {
    const jobFile = path.join(dir, "job.json");
    for (const [extra, message] of cases) {
      writeFileSync(jobFile, JSON.stringify(job(extra)));
      const p = await runNode([RUNNER, "validate", "-n", "4", jobFile]);
      assert.equal(p.code, 2, `${JSON.stringify(extra)}: ${p.stderr}`);
      assert.match(p.stderr, message);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  // Where the stage names no layout, the hosts decide when the ranks have met (the planner's test below).
  assert.doesNotThrow(() => validateGraph(parseJob(JSON.stringify(job({ input: "f" })), "q.json"), "q.json", 4));
});

test("without nodes or localSize the stage splits by host, whatever the numbering; unequal hosts fall back", () => {
  const jobWith = (extra) => parseJob(JSON.stringify({
    name: "q", tensors: { f: { dtype: "float32", count: 64 } }, stages: [{ id: "q", op: "quantized_allreduce", input: "f", output: "full", ...extra }],
  }), "q.json");
  const job = jobWith({});
  const op = (hostOf) => plan(job, { size: hostOf.length, hostOf }).program.ops[0];
  assert.deepEqual(op([0, 1, 0, 1]).compression.layout, { nodeOf: [0, 1, 0, 1] });
  const unequal = plan(job, { size: 4, hostOf: [0, 0, 0, 1] });
  assert.equal(unequal.stages[0].fallback, "the hosts hold unequal numbers of ranks (3, 1); ran the exact allreduce");
  assert.equal(unequal.program.ops[0].compression, null);
  // A layout of the stage's own stays node by node, whatever the hosts.
  const own = plan(jobWith({ localSize: 2 }), { size: 4, hostOf: [0, 0, 0, 1] });
  assert.deepEqual(own.program.ops[0].compression.layout, { localSize: 2 });
  assert.equal(own.stages[0].fallback, null);
});

test("the table names each fallback under the rows", () => {
  const time = { avg_us: 10, p50_us: 10, p95_us: 10, min_us: 10, max_us: 10 };
  const row = { op: "quantized_allreduce", size: 4004, count: 1001, type: "float32", redop: "sum", root: null, time, algbw: 0.4, busbw: 0.3 };
  const table = formatTable({
    version: "0", job: "t", world_size: 4, backend: "shm", average_bus_bandwidth: 0.3,
    results: [
      { ...row, stage: "q8", algorithm: "ring", wrong: 0, wire_bytes: 3003, rel_error: null, fallback: "count 1001 is not a multiple of W = 4; ran the exact reduce_scatter" },
      { ...row, stage: "q4", algorithm: "auto", wrong: null, wire_bytes: 700, rel_error: 0.1, fallback: null },
    ],
  });
  const lines = table.split("\n");
  assert.ok(lines.includes("# Fallback             : q8 at count 1001: count 1001 is not a multiple of W = 4; ran the exact reduce_scatter"), table);
  assert.equal(lines.filter((l) => l.startsWith("# Fallback")).length, 1);
  assert.match(lines.find((l) => l.includes("q8")), /ring .* 0 +N\/A +3003$/);
});
