// `runner trace import`: every format and version the readers know, from small fixtures written for these
// tests (test/fixtures/traces/README.md says what each holds), the real ResNet trace from ../shared/traces,
// and the bad inputs, each one line and exit 2. Replays run the imported job with --check.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { gzipSync } from "node:zlib";
import { buildJob } from "../dist/trace/job.js";
import { rankFromFileName } from "../dist/trace/names.js";
import { readTrace, readTraces } from "../dist/trace/read.js";
import { mpirun, mpiTest } from "./helpers/mpi.js";
import { REPO, RUNNER, runNode } from "./helpers/ranks.js";

const FIXTURES = path.join(REPO, "test/fixtures/traces");
const fixture = (...p) => path.join(FIXTURES, ...p);
// CI keeps a copy of shared/ beside the clone; SPMD_SHARED_DIR points elsewhere (a worktree's run).
const RESNET = path.join(process.env.SPMD_SHARED_DIR ?? path.join(REPO, "..", "shared"), "traces", "resnet-ddp-2rank.et.json.gz");

/** The job and summary that `runner trace import` would write for these files or folders. */
async function imported(paths, options = {}) {
  const { files, traces } = await readTraces(paths, options);
  return buildJob(traces, files, options);
}

const byId = (job) => new Map(job.stages.map((s) => [s.id, s]));

/** `runner trace import ARGS`, then `runner launch -n W JOB --check`: the replay's results document. */
async function importAndReplay(args, W, extra = []) {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-trace-"));
  try {
    const job = path.join(dir, "job.json");
    const imp = await runNode([RUNNER, "trace", "import", ...args, "-o", job]);
    assert.equal(imp.code, 0, imp.stderr);
    const json = path.join(dir, "r.json");
    const run = await runNode([RUNNER, "launch", "-n", String(W), job, "--check", "--iterations", "1", "--warmup", "0", "--out", dir, "--json", json, ...extra], {}, 300_000);
    assert.equal(run.code, 0, run.stderr);
    const doc = JSON.parse(readFileSync(json, "utf8"));
    for (const row of doc.results) if (row.wrong !== null) assert.equal(row.wrong, 0, `${row.stage}: ${row.wrong} wrong`);
    const runDir = readdirSync(dir).find((f) => existsSync(path.join(dir, f, "report.html")));
    const html = runDir ? readFileSync(path.join(dir, runDir, "report.html"), "utf8") : "";
    return { doc, imp, run, html, job: JSON.parse(readFileSync(job, "utf8")) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("the rank comes from a file name's rank/worker/gpu number, else its last number", () => {
  assert.equal(rankFromFileName("traces/dlrm_eg_3.json"), 3);
  assert.equal(rankFromFileName("rank-3.json.gz"), 3);
  assert.equal(rankFromFileName("worker3_step_12.pt.trace.json"), 3);
  assert.equal(rankFromFileName("trace.json"), undefined);
});

test("ET 1.0.1: positional inputs on the node, groups by backend id, every op mapped", async () => {
  const { job } = await imported([fixture("et-1.0.1")]);
  assert.equal(job.worldSize, 2);
  assert.deepEqual(job.stages.map((s) => s.op), ["allreduce", "all_gather", "broadcast", "reduce_scatter", "allreduce", "send_recv", "all_to_all", "reduce", "gather"]);
  const [ar, ag, bc, rs, bytes, p2p, a2a, red, ga] = job.stages;
  // The async allreduce (its wait comes after the all_gather) runs on a stream until the stage after its wait.
  assert.equal(ar.stream, "async1");
  assert.deepEqual(bc.after, [ar.id]);
  assert.equal(ar.inPlace, true);
  assert.equal(ag.inPlace, undefined);
  assert.deepEqual(job.tensors[ag.input], { dtype: "float16", count: 300 });
  assert.equal(bc.root, 1);
  assert.deepEqual(job.tensors[bc.input], { dtype: "int64", count: 17 });
  assert.deepEqual(rs.inputs.map((t) => job.tensors[t]), [{ dtype: "bfloat16", count: 64 }, { dtype: "bfloat16", count: 30 }]);
  assert.equal(rs.coalesced, true);
  // 7 bytes ride in 4 float16 elements.
  assert.deepEqual(job.tensors[bytes.input], { dtype: "float16", count: 4 });
  assert.equal(p2p.shift, 1);
  assert.deepEqual(job.tensors[a2a.input], { dtype: "float32", count: 40 });
  assert.deepEqual([red.root, job.tensors[red.input].dtype], [0, "float64"]);
  assert.deepEqual([ga.root, job.tensors[ga.input]], [1, { dtype: "int32", count: 5 }]);
  assert.deepEqual(job.source.dropped, [{ what: "wait", count: 2, why: job.source.dropped[0].why }]);
  assert.deepEqual(job.source.ranks, [0, 1]);
  assert.equal(job.source.schema, "1.0.1");
});

test("ET 1.1.0: named attrs, process groups as partitions, group-local roots, waits", async () => {
  const { job, summary } = await imported([fixture("et-1.1.0-groups")]);
  // [0,2] and [1,3] complete each other: one family, whose k-th collectives are one stage run in both groups.
  assert.deepEqual(job.groups, { pg_4_3: { ranks: [[0, 2], [1, 3]] } });
  const stages = job.stages.map((s) => [s.op, s.group, s.root]);
  assert.deepEqual(stages, [
    ["allreduce", undefined, undefined], ["allreduce", undefined, undefined],
    ["allreduce", "pg_4_3", undefined], ["broadcast", "pg_4_3", 1], ["reduce_scatter", undefined, undefined],
  ]);
  assert.equal(job.stages[0].stream, "async1");
  assert.deepEqual(job.stages[2].after, [job.stages[0].id]);
  // _reduce_scatter_base: 200 out per rank, 800 in.
  assert.equal(job.tensors[job.stages[4].input].count, 800);
  assert.ok(summary.includes('groups: "0" [0, 1, 2, 3] (the world); "4" [0, 2] -> job group "pg_4_3"; "3" [1, 3] -> job group "pg_4_3"'), summary.join("\n"));
});

test("a process group that leaves ranks out is completed in rank order, and the notes say so", async () => {
  const traces = (await readTraces([fixture("et-1.1.0-groups", "rank1.json")])).traces;
  // Rank 1 alone, with a group table that knows only [1, 3]: ranks 0 and 2 make the second group.
  traces[0].groups = traces[0].groups.filter((g) => g.name !== "4");
  const { job } = buildJob(traces, []);
  assert.deepEqual(job.groups, { pg_3: { ranks: [[0, 2], [1, 3]] } });
  assert.ok(job.source.notes.includes('process group "3" of 2 ranks: ranks 0, 2 (in no traced group of its size) run its collectives too, in groups of 2 in rank order (a job group partitions every rank)'), job.source.notes.join("\n"));
});

test("ET 1.1.0 with subgroups replays at W=4 with 0 wrong", async () => {
  const { doc } = await importAndReplay([fixture("et-1.1.0-groups")], 4);
  assert.equal(doc.results.length, 5);
  assert.deepEqual(doc.results.filter((r) => r.group).map((r) => [r.group, r.groups]), [["pg_4_3", 2], ["pg_4_3", 2]]);
});

test("ET 1.0.1 replays at W=2 with 0 wrong, every collective in order", async () => {
  const { doc, job } = await importAndReplay([fixture("et-1.0.1", "rank0.json"), fixture("et-1.0.1", "rank1.json")], 2);
  assert.deepEqual(new Set(doc.results.map((r) => r.stage)), new Set(job.stages.map((s) => s.id)));
});

test("Kineto: kernels ordered by ts, trace_us the slowest rank's, bare kernels dropped, gaps as compute", async () => {
  const { job, summary } = await imported([fixture("kineto-2rank")], { computeGaps: true });
  assert.equal(job.source.format, "kineto");
  const collectives = job.stages.filter((s) => s.op !== "compute");
  assert.deepEqual(collectives.map((s) => s.op), ["allreduce", "all_gather", "reduce_scatter", "broadcast"]);
  // Rank 1's kernels are 1 us longer than rank 0's.
  assert.deepEqual(collectives.map((s) => job.source.trace_us[s.id]), [311.5, 43.3, 56, 21]);
  assert.deepEqual(job.tensors[collectives[1].input], { dtype: "bfloat16", count: 1024 });
  assert.equal(job.tensors[collectives[2].input].count, 4096);
  // Gaps on rank 0's timeline: 120 us, then 80 + 12 (the bare kernel) + 30, then none.
  assert.deepEqual(job.stages.filter((s) => s.op === "compute").map((s) => s.us), [120, 122]);
  assert.deepEqual(job.source.dropped.map((d) => [d.what, d.count]), [["NCCL kernel without collective arguments", 2]]);
  assert.ok(summary.some((l) => /^dropped: 2 × NCCL kernel/.test(l)), summary.join("\n"));
});

test("Kineto replay: rows carry trace_us and the table shows it beside the time", async () => {
  const { doc, run, html } = await importAndReplay([fixture("kineto-2rank")], 2);
  assert.deepEqual(doc.results.map((r) => r.trace_us), [311.5, 43.3, 56, 21]);
  assert.match(html, /Replay against the trace/);
  assert.match(html, /<th>time<\/th><th>trace<\/th><th>algbw<\/th>/);
  assert.equal(doc.source.format, "kineto");
  assert.match(run.stdout, /time\s+trace\s+algbw/);
  assert.match(run.stdout, /allreduce-0 .* 311\.50 /);
});

test("Kineto: a group list cut after 30 ranks is rebuilt from start and stride; one rank stands for all", async () => {
  const { job, summary } = await imported([fixture("kineto-64rank")]);
  const odd = Array.from({ length: 32 }, (_, i) => 2 * i + 1), even = odd.map((r) => r - 1);
  assert.deepEqual(job.groups, { pg_7: { ranks: [even, odd] } });
  assert.ok(job.source.notes.some((n) => n.startsWith('process group "7" of 32 ranks: ranks 0, 2, 4, 6,')), job.source.notes.join("\n"));
  assert.equal(job.worldSize, 64);
  assert.deepEqual(job.source.ranks, [5]);
  assert.ok(summary.some((l) => l.includes("rank 5's trace stands for all 64 ranks") && l.includes("missing ranks 0-4, 6-63")), summary.join("\n"));
});

test("the ResNet DDP trace's comms (a fixture cut from the real one): 3 steps of 2 broadcasts and 5 allreduce buckets", async () => {
  const { job } = await imported([fixture("resnet-ddp-rank1.comms.et.json.gz")]);
  const sizes = [2049000, 7875584, 6563840, 6637568, 2431040];
  const expected = [0, 1, 2].flatMap(() => [["broadcast", "float32", 53120], ["broadcast", "int64", 53], ...sizes.map((n) => ["allreduce", "float32", n])]);
  assert.deepEqual(job.stages.map((s) => [s.op, job.tensors[s.input].dtype, job.tensors[s.input].count]), expected);
  assert.deepEqual(job.stages.filter((s) => s.stream).map((s) => s.id), ["broadcast-0", "broadcast-7", "broadcast-14"]);
  assert.deepEqual(job.source.notes, ["rank 1's trace stands for all 2 ranks: every rank does the same (no rank-dependent splits), missing rank 0"]);
});

test("the real ResNet trace (../shared/traces) imports and replays at W=2 with 0 wrong, every collective in order", async () => {
  assert.ok(existsSync(RESNET), `${RESNET} is missing (CI keeps shared/ beside the clone)`);
  const { doc, imp, job } = await importAndReplay([RESNET, "--step", "all"], 2);
  assert.match(imp.stdout, /rank 1 \(from its collectives' own rank\) of 2, 21 collectives/);
  // Each stage's input and output per rank, stages alike counted once, in the job's op names (#64).
  assert.match(imp.stdout, /^collectives: 21 \(each rank's input and output per stage; stages alike counted once\)\n {2}broadcast +3 × +in +207\.5 KiB +out +207\.5 KiB\n {2}broadcast +3 × +in +424 B +out +424 B\n {2}allreduce +3 × +in +7\.82 MiB +out +7\.82 MiB$/m);
  assert.equal(job.stages.length, 21);
  // Results come in schedule order, which keeps the trace's.
  assert.deepEqual(doc.results.map((r) => r.stage), job.stages.map((s) => s.id));
});

test("--world N rescales a whole-world trace, and refuses one with subgroups naming the first op", async () => {
  const { job } = await imported([fixture("resnet-ddp-rank1.comms.et.json.gz")], { world: 4 });
  assert.equal(job.worldSize, 4);
  assert.equal(job.source.worldSize, 2);
  const p = await runNode([RUNNER, "trace", "import", fixture("et-1.1.0-groups"), "--world", "8"]);
  assert.equal(p.code, 2);
  assert.match(p.stderr, /^runner: .*rank0\.json: cannot replay at --world 8: allreduce \(group 4\+3 #0\) runs on process group "4" of 2 of 4 ranks\n$/);
});

test("--world 3 replays a 2-rank Kineto trace at an odd world size with 0 wrong, each rank's message sizes kept", async () => {
  const { doc, job } = await importAndReplay([fixture("kineto-2rank"), "--world", "3"], 3);
  assert.equal(job.worldSize, 3);
  assert.equal(doc.world_size, 3);
  // reduce_scatter: 2048 out per rank, so 3 × 2048 in.
  assert.deepEqual(doc.results.map((r) => [r.op, r.count]), [["allreduce", 262144], ["all_gather", 3072], ["reduce_scatter", 6144], ["broadcast", 999]]);
});

test("a job that records its world size refuses a launch at another, naming both", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-trace-"));
  try {
    const job = path.join(dir, "job.json");
    assert.equal((await runNode([RUNNER, "trace", "import", fixture("et-1.0.1"), "-o", job])).code, 0);
    for (const args of [["validate", "-n", "3", job], ["launch", "-n", "3", job]]) {
      const p = await runNode([RUNNER, ...args]);
      assert.equal(p.code, 2);
      assert.match(p.stderr, /^runner: .*job\.json: worldSize: the job runs at 2 ranks only, not 3 \(the trace's world size; [^\n]*\)\n$/);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** A trace file in a temporary folder; `runner trace import` on it must exit 2 with one line naming it. */
async function refuses(name, content, pattern, more = []) {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-trace-bad-"));
  try {
    const file = path.join(dir, name);
    writeFileSync(file, content);
    const p = await runNode([RUNNER, "trace", "import", file, ...more]);
    assert.equal(p.code, 2, p.stderr);
    const lines = p.stderr.trimEnd().split("\n");
    assert.equal(lines.length, 1, p.stderr);
    assert.ok(lines[0].includes(file), lines[0]);
    assert.match(lines[0], pattern);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const etText = (file) => readFileSync(fixture(file), "utf8");

test("bad input: each one line, exit 2, naming the file", async () => {
  await refuses("rank0.json", "{ not json", /not JSON/);
  await refuses("rank0.json.gz", gzipSync(etText("et-1.0.1/rank0.json")).subarray(0, 300), /truncated gzip/);
  await refuses("rank0.json", etText("et-1.0.1/rank0.json").replace('"1.0.1"', '"2.0.0"'), /unknown Execution Trace schema "2\.0\.0"/);
  await refuses("rank0.json", JSON.stringify({ schema: "1.1.0", nodes: [] }), /no collectives to replay/);
  const kineto = JSON.parse(etText("kineto-2rank/rank0.pt.trace.json"));
  for (const e of kineto.traceEvents) if (e.cat === "kernel") e.args = {};
  await refuses("rank0.json", JSON.stringify(kineto), /carry no collective arguments .*ProfilerActivity\.CPU, ProfilerActivity\.CUDA/);
  await refuses("rank0.json", "[1, 2]", /expected a JSON object/);
  await refuses("rank0.json", etText("et-1.0.1/rank0.json"), /--compute gaps needs a Kineto trace's timeline/, ["--compute", "gaps"]);
});

test("a trace without its rank takes the file name's; two files of one rank are refused", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-trace-"));
  try {
    const kineto = JSON.parse(etText("kineto-2rank/rank1.pt.trace.json"));
    delete kineto.distributedInfo.rank;
    writeFileSync(path.join(dir, "worker1_step_7.json"), JSON.stringify(kineto));
    const t = await readTrace(path.join(dir, "worker1_step_7.json"));
    assert.deepEqual([t.rank, t.rankFrom], [1, "the file name"]);
    writeFileSync(path.join(dir, "again.json"), etText("kineto-2rank/rank1.pt.trace.json"));
    const p = await runNode([RUNNER, "trace", "import", dir]);
    assert.equal(p.code, 2, p.stderr);
    assert.match(p.stderr, /^runner: .*: rank 1 \(from .*\) again: .* is rank 1 too\n$/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("ranks whose traces disagree are refused, naming the file", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-trace-bad-"));
  try {
    writeFileSync(path.join(dir, "rank0.json"), etText("et-1.1.0-groups/rank0.json"));
    writeFileSync(path.join(dir, "rank1.json"), etText("et-1.1.0-groups/rank1.json").replaceAll('"value": 512', '"value": 513'));
    const p = await runNode([RUNNER, "trace", "import", dir]);
    assert.equal(p.code, 2, p.stderr);
    assert.match(p.stderr, /^runner: .*rank1\.json: ranks disagree at group 0 #1: rank 0 has allreduce of 512 Float, rank 1 allreduce of 513 Float\n$/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("all_to_allv with rank-dependent splits needs every rank: the missing ones are named", async () => {
  const files = [0, 1, 2, 5].map((r) => fixture("a2av-8rank", `dlrm_eg_${r}.et.json`));
  const p = await runNode([RUNNER, "trace", "import", ...files]);
  assert.equal(p.code, 2, p.stderr);
  assert.match(p.stderr, /^runner: .*: alltoall_base \(group 0 #1\) has rank-dependent splits, so it needs every rank's trace: missing ranks 3, 4, 6, 7\n$/);
});

test("all_to_allv: what i sends j must be what j receives from i", async () => {
  const traces = (await readTraces([fixture("a2av-8rank")])).traces;
  traces[3].collectives[1].outSplits[6] += 1;
  assert.throws(() => buildJob(traces, []), /dlrm_eg_3\.et\.json: ranks disagree at group 0 #1 \(alltoall_base\): rank 6 sends rank 3 \d+ elements, rank 3 receives \d+ from it/);
});

// The counts the 8-rank fixture's ranks record: rank i sends counts[i][j] floats to rank j.
const A2AV = Array.from({ length: 8 }, (_, i) => Array.from({ length: 8 }, (_, j) => ((i * 3 + j * 5) % 7) + (i === j ? 0 : i + 1)));

test("all_to_allv: every rank's own splits make the job's counts matrix, the tensor the largest row", async () => {
  const { job } = await imported([fixture("a2av-8rank")]);
  const [, floats, longs] = job.stages;
  assert.deepEqual(floats.counts, A2AV);
  assert.deepEqual(job.tensors[floats.input], { dtype: "float32", count: Math.max(...A2AV.map((row) => row.reduce((a, b) => a + b))) });
  assert.deepEqual(longs.counts, A2AV.map((row) => row.map((n) => 2 * n + 1)));
  assert.equal(job.tensors[longs.input].dtype, "int64");
});

/** The 8-rank all_to_allv job, imported into a temporary folder; `fn(job, dir)` runs it. */
async function withA2avJob(fn) {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-trace-a2av-"));
  try {
    const job = path.join(dir, "job.json");
    const imp = await runNode([RUNNER, "trace", "import", fixture("a2av-8rank"), "-o", job]);
    assert.equal(imp.code, 0, imp.stderr);
    await fn(job, dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Every row checked, none wrong, the all_to_allv rows among them. */
function checkA2av(doc) {
  assert.deepEqual(doc.results.map((r) => r.op), ["allreduce", "all_to_allv", "all_to_allv"]);
  for (const row of doc.results) assert.equal(row.wrong, 0, `${row.stage}: ${row.wrong} wrong`);
}

for (const backend of ["shm", "tcp"]) {
  test(`the 8-rank all_to_allv trace (uneven, rank-dependent splits) replays at W=8 on ${backend} with 0 wrong`, async () => {
    await withA2avJob(async (job, dir) => {
      const json = path.join(dir, "r.json");
      const p = await runNode([RUNNER, "launch", "-n", "8", job, "--backend", backend, "--check", "--iterations", "2", "--warmup", "1", "--out", dir, "--json", json], {}, 300_000);
      assert.equal(p.code, 0, p.stderr);
      checkA2av(JSON.parse(readFileSync(json, "utf8")));
    });
  });
}

mpiTest("the 8-rank all_to_allv trace replays at W=8 on mpi with 0 wrong", async () => {
  await withA2avJob(async (job, dir) => {
    const json = path.join(dir, "r.json");
    const p = await mpirun(8, [job, "--backend", "mpi", "--check", "--iterations", "2", "--warmup", "1", "--out", dir, "--json", json]);
    assert.equal(p.code, 0, p.stderr);
    checkA2av(JSON.parse(readFileSync(json, "utf8")));
  });
});

// ---- Issue #41: ET 1.0.1 without a group table, Kineto from every PyTorch 2.x, steps, archives.

// The 1.0.1 / Kineto twins' matrices (test/fixtures/traces/generate.mjs): rank i sends A[s][i][j] to j in step s+1.
const A41 = [
  Array.from({ length: 8 }, (_, i) => Array.from({ length: 8 }, (_, j) => ((i * 3 + j * 5) % 7) + (i === j ? 0 : i + 1))),
  Array.from({ length: 8 }, (_, i) => Array.from({ length: 8 }, (_, j) => (i + 2 * j) % 5)),
];
const opsAndCounts = (job) => job.stages.map((s) => [s.op, job.tensors[s.input]?.dtype, job.tensors[s.input]?.count, s.counts]);

test("ET 1.0.1 without a process-group table: the world of the traces given, checked against the split lists", async () => {
  const { job, summary } = await imported([fixture("et-1.0.1-a2av-8rank")], { step: "all" });
  assert.equal(job.worldSize, 8);
  assert.equal(job.source.schema, "1.0.1");
  assert.deepEqual(opsAndCounts(job), A41.flatMap((m, s) => [
    ["allreduce", "float32", 1000 * (s + 1), undefined],
    ["all_to_allv", "float32", Math.max(...m.map((r) => r.reduce((a, b) => a + b))), m],
    ["all_to_allv", "int64", Math.max(...m.map((r) => r.reduce((a, b) => a + 2 * b + 1, 0))), m.map((r) => r.map((n) => 2 * n + 1))],
  ]));
  assert.ok(job.source.notes.includes("the trace records no process-group table: its collectives run on the world of 8 ranks (from its split lists' length)"), job.source.notes.join("\n"));
  assert.ok(summary.includes("steps: all 2 profiled (ProfilerStep#1, 2) in order, as one replay iteration (--step all); 8 collectives outside any step (set-up) left out"), summary.join("\n"));
  // --world that the split lists contradict: refused naming the file.
  await assert.rejects(imported([fixture("et-1.0.1-a2av-8rank")], { world: 4 }), /dlrm_eg_0\.et\.json: its split lists name 8 ranks, but the world is 4 \(from --world\): the trace records no process-group table/);
});

test("ET 1.0.1 (uneven all_to_allv, no group table) and its Kineto twin: the same stages, each replays at W=8 with 0 wrong", async () => {
  const et = await importAndReplay([fixture("et-1.0.1-a2av-8rank"), "--step", "all"], 8);
  const kineto = await importAndReplay([fixture("kineto-a2av-8rank"), "--step", "all"], 8);
  assert.deepEqual(opsAndCounts(kineto.job), opsAndCounts(et.job));
  assert.equal(kineto.doc.results.length, 6);
  // The Kineto twin's kernels give each stage the slowest rank's time (rank 7's allreduce is 37 us).
  assert.equal(kineto.job.source.trace_us["allreduce-0"], 37);
});

test("Kineto before PyTorch 2.2: sizes from the nccl:<op> annotations, kernels matched by their launch", async () => {
  const { job, summary } = await imported([fixture("kineto-pre2.2-w8")]);
  assert.equal(job.worldSize, 8);
  assert.deepEqual(job.source.ranks, [3]);
  assert.deepEqual(job.stages.map((s) => [s.op, job.tensors[s.input].dtype, job.tensors[s.input].count, s.root]), [
    ["allreduce", "float32", 256 * 1028, undefined], ["all_gather", "bfloat16", 4096, undefined], ["reduce_scatter", "float16", 8 * 512, undefined],
    // 768 unsigned chars ride in 384 float16 elements.
    ["all_to_all", "float16", 384, undefined], ["broadcast", "int64", 333, 0],
  ]);
  // Each collective's own kernel (rank 3's are 28 us).
  assert.deepEqual(Object.values(job.source.trace_us), [28, 28, 28, 28, 28]);
  assert.ok(summary.includes("step: ProfilerStep#101 (the last that every rank recorded completely); left out: 100 (--step N picks one, --step all keeps them all)"), summary.join("\n"));
  assert.ok(job.source.notes.some((n) => n.startsWith("a trace from before PyTorch 2.2: sizes from the nccl:<op> annotations' inputs")), job.source.notes.join("\n"));
});

test("Kineto before PyTorch 2.2 replays with 0 wrong: rank 3 of 8 at W=8, ranks 0 and 1 of 16 at W=16", async () => {
  const w8 = await importAndReplay([fixture("kineto-pre2.2-w8"), "--step", "all"], 8);
  assert.equal(w8.doc.results.length, 10);
  const w16 = await importAndReplay([fixture("kineto-pre2.2-w16")], 16);
  assert.deepEqual(w16.doc.results.map((r) => r.op), ["allreduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"]);
  assert.equal(w16.job.tensors[w16.job.stages[2].input].count, 16 * 512);
});

test("Kineto at world size 1: the record_param_comms CPU ops' arguments; replays at W=1 with 0 wrong", async () => {
  const { job, doc } = await importAndReplay([fixture("kineto-world1"), "--step", "all"], 1);
  assert.equal(job.worldSize, 1);
  assert.deepEqual(opsAndCounts(job).map((x) => x.slice(0, 3)), [["allreduce", "float32", 2048], ["all_gather", "bfloat16", 512], ["allreduce", "float32", 2048], ["all_gather", "bfloat16", 512]]);
  assert.equal(doc.results.length, 4);
  // Its waits name no group ("Global rank start" -1, as PyTorch writes them): dropped, not checked (#64).
  assert.deepEqual(job.source.dropped.map((d) => [d.what, d.count]), [["wait", 2]]);
});

test("Kineto with nothing usable: the message names the real cause", async () => {
  const world1 = JSON.parse(etText("kineto-world1/rank0.pt.trace.json"));
  world1.traceEvents = world1.traceEvents.filter((e) => e.name !== "record_param_comms");
  await refuses("rank0.json", JSON.stringify(world1), /its 6 kernels include no NCCL one, and it holds no record_param_comms CPU op nor nccl:<op> annotation: .* \(at world size 1 NCCL launches no kernels/);
  const pre = JSON.parse(etText("kineto-pre2.2-w8/worker3.pt.trace.json"));
  pre.traceEvents = pre.traceEvents.filter((e) => !e.name.startsWith("nccl:"));
  await refuses("rank0.json", JSON.stringify(pre), /its 10 NCCL kernel events carry no collective arguments .* and it holds no record_param_comms CPU op with them \(10 without\) nor nccl:<op> annotation: recorded without shapes: profile with record_shapes=True \(record with/);
  // Annotations without sizes (HTA's df_index_resolver trace: profiled without record_shapes) say so (#64).
  const shapeless = JSON.parse(etText("kineto-pre2.2-w8/worker3.pt.trace.json"));
  for (const e of shapeless.traceEvents) if (e.name.startsWith("nccl:")) delete e.args["Input Dims"];
  await refuses("rank0.json", JSON.stringify(shapeless), /no collectives to replay: 10 × nccl:all_reduce, .* \(recorded without shapes: profile with record_shapes=True\)$/);
  await refuses("rank0.json", JSON.stringify({ schemaVersion: 1, traceEvents: [{ ph: "X", cat: "cpu_op", name: "aten::mm", ts: 1, dur: 1 }] }), /no NCCL kernel, record_param_comms op or nccl:<op> annotation: this trace records no collectives/);
});

test("steps: the last whole one by default, --step N, --step all; traces without marks replay whole", async () => {
  // ET: the real ResNet trace has ProfilerStep#4-6; its DDP collectives are not the step nodes' descendants.
  const last = await imported([RESNET]);
  assert.equal(last.job.stages.length, 7);
  assert.ok(last.summary.includes("step: ProfilerStep#6 (the last that every rank recorded completely); left out: 4, 5 (--step N picks one, --step all keeps them all)"), last.summary.join("\n"));
  assert.equal(last.job.source.steps, "ProfilerStep#6 (the last that every rank recorded completely); left out: 4, 5 (--step N picks one, --step all keeps them all)");
  const five = await imported([RESNET], { step: 5 });
  assert.deepEqual(five.job.stages.map((s) => s.op), last.job.stages.map((s) => s.op));
  assert.ok(five.summary.includes("step: ProfilerStep#5 (--step 5); left out: 4, 6 (--step N picks one, --step all keeps them all)"), five.summary.join("\n"));
  assert.equal((await imported([RESNET], { step: "all" })).job.stages.length, 21);
  await assert.rejects(imported([RESNET], { step: 9 }), /resnet-ddp-2rank\.et\.json\.gz: --step 9: this trace's steps are ProfilerStep#4, 5, 6$/);
  // Kineto: each step's time window (the twin's two steps).
  const k = await imported([fixture("kineto-a2av-8rank")], { step: 1 });
  assert.deepEqual(k.job.stages[1].counts, A41[0]);
  // No marks: the whole trace, and --step is refused.
  const whole = await imported([fixture("kineto-2rank")]);
  assert.ok(whole.summary.includes("steps: the trace marks none (no ProfilerStep#N): it replays whole"), whole.summary.join("\n"));
  await assert.rejects(imported([fixture("kineto-2rank")], { step: 3 }), /--step 3: the trace records no step marks/);
});

test("archives: a .json.tar.gz and a .tar of gzipped traces are read in place, as the folder is", async () => {
  const { create } = await import("tar");
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-trace-tar-"));
  try {
    const tgz = path.join(dir, "dlrm_traces.json.tar.gz");
    await create({ gzip: true, file: tgz, cwd: FIXTURES }, ["et-1.0.1-a2av-8rank"]);
    const folder = await imported([fixture("et-1.0.1-a2av-8rank")]);
    const archived = await imported([tgz]);
    assert.deepEqual(archived.job.stages, folder.job.stages);
    assert.equal(archived.job.source.files[3], `${tgz}:et-1.0.1-a2av-8rank/dlrm_eg_3.et.json`);
    // A plain tar whose members are gzipped, beside other files it leaves alone.
    for (let r = 0; r < 8; r++) writeFileSync(path.join(dir, `rank${r}.pt.trace.json.gz`), gzipSync(readFileSync(fixture("kineto-a2av-8rank", `rank${r}.pt.trace.json`))));
    writeFileSync(path.join(dir, "notes.txt"), "not a trace");
    const tar = path.join(dir, "kineto.tar");
    await create({ file: tar, cwd: dir }, ["notes.txt", ...Array.from({ length: 8 }, (_, r) => `rank${r}.pt.trace.json.gz`)]);
    const p = await runNode([RUNNER, "trace", "import", tar, "-o", path.join(dir, "job.json")]);
    assert.equal(p.code, 0, p.stderr);
    assert.match(p.stdout, /kineto\.tar:rank7\.pt\.trace\.json\.gz: Kineto trace, schema 1, rank 7 \(from the trace's distributedInfo\) of 8, 3 collectives/);
    // Cut short: one line.
    writeFileSync(path.join(dir, "cut.tar"), readFileSync(tar).subarray(0, 5000));
    const cut = await runNode([RUNNER, "trace", "import", path.join(dir, "cut.tar")]);
    assert.equal(cut.code, 2, cut.stderr);
    assert.match(cut.stderr, /^runner: .*cut\.tar(:rank0\.pt\.trace\.json\.gz)?: .*(cut short|truncated|Truncated)/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// ---- Chakra protobuf (.et): import, export, round trip.
const CHAKRA = path.join(path.dirname(RESNET), "chakra-resnet.0.et");

/** What a stage does, without its id or the job group's name: op, tensor, root, partition, counts. */
const stageShape = (job) => job.stages.map((s) => ({
  op: s.op, tensor: job.tensors[s.input], inputs: s.inputs?.map((t) => job.tensors[t]), root: s.root, groups: s.group && job.groups[s.group].ranks, counts: s.counts,
}));

test("Chakra .et (../shared/traces): --world is required, then 2 broadcasts and 5 allreduces replay at W=2 with 0 wrong", async () => {
  assert.ok(existsSync(CHAKRA), `${CHAKRA} is missing (CI keeps shared/ beside the clone)`);
  const p = await runNode([RUNNER, "trace", "import", CHAKRA]);
  assert.equal(p.code, 2);
  assert.match(p.stderr, /^runner: .*chakra-resnet\.0\.et: a Chakra trace records no world size: give it with --world N\n$/);
  const { doc, imp, job } = await importAndReplay([CHAKRA, "--world", "2"], 2);
  assert.match(imp.stdout, /chakra-resnet\.0\.et: Chakra trace, schema 1\.0\.1, rank 0 \(from the file name\) of 2, 7 collectives/);
  assert.deepEqual(job.stages.map((s) => [s.op, job.tensors[s.input].dtype, job.tensors[s.input].count]), [
    ["broadcast", "float32", 53120], ["broadcast", "int64", 53],
    ...[2049000, 7875584, 6563840, 6637568, 2431040].map((n) => ["allreduce", "float32", n]),
  ]);
  assert.equal(doc.results.length, 7);
});

test("trace export writes one Chakra .et per rank; importing them gives back the same stages", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-trace-chakra-"));
  try {
    for (const [name, args] of [["groups", [fixture("et-1.1.0-groups")]], ["a2av", [fixture("et-1.0.1-a2av-8rank"), "--step", "all"]], ["kineto", [fixture("kineto-pre2.2-w8")]]]) {
      const job = path.join(dir, `${name}.json`);
      assert.equal((await runNode([RUNNER, "trace", "import", ...args, "-o", job])).code, 0);
      const out = path.join(dir, name);
      const p = await runNode([RUNNER, "trace", "export", job, "-o", out]);
      assert.equal(p.code, 0, p.stderr);
      const original = JSON.parse(readFileSync(job, "utf8"));
      assert.equal(readdirSync(out).length, original.worldSize);
      const again = await imported([out]);
      assert.deepEqual(stageShape(again.job), stageShape(original), name);
      assert.equal(again.job.source.format, "chakra");
    }
    // A hand-written job without a world size needs --world.
    const p = await runNode([RUNNER, "trace", "export", path.join(REPO, "jobs", "quickstart.json"), "-o", path.join(dir, "q")]);
    assert.equal(p.code, 2, p.stderr);
    assert.match(p.stderr, /quickstart\.json: the job records no world size: give it with --world N\n$/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a broken Chakra file is one line naming it", async () => {
  await refuses("rank0.et", Buffer.from([0x1b, 0x5b, 0x32, 0x4a, 0x07, 0xff, 0xff, 0xff, 0xff, 0x0f]), /not a Chakra trace: its first record is no GlobalMetadata/);
  const real = readFileSync(CHAKRA);
  await refuses("chakra.0.et", real.subarray(0, 100_000), /node record \d+ \(at byte \d+\): not a Chakra Node/, ["--world", "2"]);
});

/** A Chakra .et as chakra_jsonizer writes it: each message as protobuf JSON (lowerCamelCase, 64-bit ints and enums as strings), one after another. */
async function chakraJson(etFile) {
  const { chakraCodec } = await import("../dist/trace/chakra.js");
  const { pb, json } = await chakraCodec();
  const reader = pb.Reader.create(readFileSync(etFile));
  const text = (type) => JSON.stringify(type.toObject(type.decodeDelimited(reader), { longs: String, enums: String, bytes: String }), null, 2);
  let out = text(json.GlobalMetadata);
  while (reader.pos < reader.len) out += text(json.Node);
  return out;
}

test("Chakra's JSON form (chakra_jsonizer's) imports to the same stages as the .et it came from; a cut or foreign one is one line", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-trace-chakra-json-"));
  try {
    const file = path.join(dir, "chakra-resnet.0.json");
    const text = await chakraJson(CHAKRA);
    writeFileSync(file, text);
    assert.match(text, /^\{\n {2}"attr": \[/);
    assert.match(text, /"type": "COMM_COLL_NODE"/);
    const fromJson = await imported([file], { world: 2 }), fromEt = await imported([CHAKRA], { world: 2 });
    assert.deepEqual(stageShape(fromJson.job), stageShape(fromEt.job));
    assert.equal(fromJson.job.stages.length, 7);
    await refuses("cut.0.json", text.slice(0, 5000), /cut short: its last record is not closed/, ["--world", "2"]);
    await refuses("junk.0.json", '{"attr": []} [1]x', /not Chakra JSON: "x" between records at byte 16/, ["--world", "2"]);
    await refuses("node.0.json", '{"attr": []}{"attr": 5}', /record 1: not a Chakra Node in protobuf JSON \(\.ChakraProtoMsg\.Node\.attr: array expected\)/, ["--world", "2"]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a fresh clone replays a real trace: traces/ ships it with its origin and licence, the README's example is what the import prints, jobs/resnet-ddp-replay.json is that job", async () => {
  const trace = path.join(REPO, "traces", "resnet-ddp-2rank.et.json.gz");
  assert.ok(existsSync(trace));
  const notes = readFileSync(path.join(REPO, "traces", "README.md"), "utf8");
  assert.match(notes, /facebookresearch\/param/);
  assert.match(notes, /MIT License/);
  const readme = readFileSync(path.join(REPO, "README.md"), "utf8");
  assert.doesNotMatch(readme, /shared\/traces/);
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-trace-readme-"));
  try {
    const p = await runNode([RUNNER, "trace", "import", "traces/resnet-ddp-2rank.et.json.gz", "-o", path.join(dir, "j.json")]);
    assert.equal(p.code, 0, p.stderr);
    const printed = p.stdout.replace(path.join(dir, "j.json"), "j.json").trimEnd();
    assert.ok(readme.includes(`\`\`\`\n${printed}\n\`\`\``), `the README's example output is not:\n${printed}`);
    const job = JSON.parse(readFileSync(path.join(dir, "j.json"), "utf8"));
    const shipped = JSON.parse(readFileSync(path.join(REPO, "jobs", "resnet-ddp-replay.json"), "utf8"));
    assert.deepEqual(shipped, { ...job, name: shipped.name });
    assert.deepEqual(shipped.source.files, ["traces/resnet-ddp-2rank.et.json.gz"]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// ---- Chakra as ASTRA-sim writes it (issue #64): fixtures from its generator scripts' shapes (generate-chakra.mjs).
const ASTRA = (...p) => fixture("astra-sim", ...p);
const MiB = 1024 * 1024;

test("ASTRA-sim's microbenchmarks: each collective's comm_size read as ASTRA-sim's Ring.cc reads it, at 4, 8 and 16 NPUs", async () => {
  // comm_size is each rank's input; the output is all-gather's W times it, reduce-scatter's a W-th (Ring.cc).
  const expected = { all_reduce: ["allreduce", (_W) => MiB], all_gather: ["all_gather", (W) => W * MiB], reduce_scatter: ["reduce_scatter", (W) => MiB / W], all_to_all: ["all_to_all", (_W) => MiB] };
  for (const [coll, [op, output]] of Object.entries(expected)) {
    for (const W of [4, 8, 16]) {
      const { job, summary } = await imported([ASTRA(coll, `${W}npus_1MB`)], { world: W });
      // No dtype in the trace: bytes, which ride as float16 pairs.
      assert.deepEqual(opsAndCounts(job), [[op, "float16", MiB / 2, undefined]], `${coll} at ${W}`);
      const row = summary.find((l) => l.startsWith(`  ${op} `));
      const size = (b) => (b >= MiB ? `${b / MiB} MiB` : `${b / 1024} KiB`);
      assert.match(row ?? "", new RegExp(`^ {2}${op} +1 × +in +1 MiB +out +${size(output(W))}$`), summary.join("\n"));
    }
  }
});

test("ASTRA-sim's reduce_scatter/4npus_1MB replays at W=4 with 0 wrong, 1 MiB in per rank", async () => {
  const { doc, job } = await importAndReplay([ASTRA("reduce_scatter", "4npus_1MB"), "--world", "4"], 4);
  assert.deepEqual(opsAndCounts(job), [["reduce_scatter", "float16", MiB / 2, undefined]]);
  assert.equal(doc.results.length, 1);
});

test("ASTRA-sim's MSCCL ring allreduce (sends and receives with data dependencies) replays at W=4 and W=8 with 0 wrong: a send_recv round per step", async () => {
  for (const W of [4, 8]) {
    const { doc, job, imp } = await importAndReplay([ASTRA(`custom_ring_allreduce_${W}npus_1MB`), "--world", String(W)], W);
    // 2(W-1) steps, each rank sending one chunk (1 MiB / W) to rank + 1 and receiving one from rank - 1.
    assert.deepEqual(job.stages.map((s) => [s.op, s.shift, job.tensors[s.input].count]), Array.from({ length: 2 * (W - 1) }, () => ["send_recv", 1, MiB / W / 2]));
    assert.match(imp.stdout, new RegExp(`^ {2}send_recv +${2 * (W - 1)} × +in +${1024 / W} KiB +out +${1024 / W} KiB$`, "m"));
    assert.equal(doc.results.length, 2 * (W - 1));
  }
});

/** The ring's .et files of every rank into `dir`, rank `rank`'s with `edit` applied to its decoded nodes. */
async function editedRing(dir, W, rank, edit) {
  const { chakraCodec } = await import("../dist/trace/chakra.js");
  const { pb, GlobalMetadata, Node } = await chakraCodec();
  const from = ASTRA(`custom_ring_allreduce_${W}npus_1MB`);
  for (const f of readdirSync(from)) {
    if (!f.endsWith(`.${rank}.et`)) {
      writeFileSync(path.join(dir, f), readFileSync(path.join(from, f)));
      continue;
    }
    const reader = pb.Reader.create(readFileSync(path.join(from, f)));
    const meta = GlobalMetadata.decodeDelimited(reader), nodes = [];
    while (reader.pos < reader.len) nodes.push(Node.toObject(Node.decodeDelimited(reader), { longs: Number }));
    const writer = pb.Writer.create();
    GlobalMetadata.encodeDelimited(meta, writer);
    for (const n of edit(nodes)) Node.encodeDelimited(Node.fromObject(n), writer);
    writeFileSync(path.join(dir, f), writer.finish());
  }
}

test("a send without its receive is one line naming both ranks and the node, exit 2; so is a cycle of dependencies", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-trace-ring-"));
  try {
    // Rank 2 loses its last receive (from rank 1): rank 1's last send has no match.
    await editedRing(dir, 4, 2, (nodes) => nodes.filter((n) => n.name !== "COMM_RECV_NODE_tb1_step5"));
    const p = await runNode([RUNNER, "trace", "import", dir, "--world", "4"]);
    assert.equal(p.code, 2, p.stderr);
    assert.match(p.stderr, /^runner: \S+allreduce_ring_4ranks\.1\.et: rank 1's send to rank 2 \(node 5 \(COMM_SEND_NODE_tb0_step5\), the 6th on that pair, tag 0\) has no matching receive in rank 2's trace \(\S+allreduce_ring_4ranks\.2\.et\)\n$/);
    // Rank 3's first send waits for its last, which waits (through its thread block) for the first.
    await editedRing(dir, 4, 3, (nodes) => nodes.map((n) => (n.name === "COMM_SEND_NODE_tb0_step0" ? { ...n, data_deps: [nodes.find((m) => m.name === "COMM_SEND_NODE_tb0_step5").id] } : n)));
    const q = await runNode([RUNNER, "trace", "import", dir, "--world", "4"]);
    assert.equal(q.code, 2, q.stderr);
    assert.match(q.stderr, /allreduce_ring_4ranks\.3\.et: node 0 \(COMM_SEND_NODE_tb0_step0\): its dependencies form a cycle\n$/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/**
 * What a job does, names aside: each stage in schedule order with its tensors' dtype and count, its group as rank
 * lists, `after` as schedule positions, and every other field (stream, reduce, options) as parsed, defaults filled in.
 */
async function jobShape(file, W) {
  const { loadJob } = await import("../dist/config/load.js");
  const { jobGroups } = await import("../dist/graph/groups.js");
  const { topologicalOrder } = await import("../dist/graph/schedule.js");
  const job = loadJob(file);
  const groups = jobGroups(job, W, [Array.from({ length: W }, (_, r) => r)]);
  const order = topologicalOrder(job.stages).map((i) => job.stages[i]);
  const position = new Map(order.map((s, k) => [s.id, k]));
  const tensor = (name) => ({ dtype: job.tensors[name].dtype, count: job.tensors[name].count });
  return {
    stages: order.map(({ id: _id, input, inputs, group, after, ...rest }) => ({
      ...rest, tensors: (inputs ?? (input === undefined ? [] : [input])).map(tensor), group: group && groups.get(group), after: (after ?? []).map((a) => position.get(a)).sort(),
    })),
  };
}

test("export then import gives back every job in jobs/: each stage, tensor and edge (names aside), with one spelling of op names", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-trace-roundtrip-"));
  try {
    for (const name of readdirSync(path.join(REPO, "jobs")).filter((f) => f.endsWith(".json"))) {
      const file = path.join(REPO, "jobs", name);
      const W = JSON.parse(readFileSync(file, "utf8")).worldSize ?? 4;
      const out = path.join(dir, name);
      const exp = await runNode([RUNNER, "trace", "export", file, "--world", String(W), "-o", out]);
      assert.equal(exp.code, 0, exp.stderr);
      const back = path.join(dir, `${name}.back.json`);
      const imp = await runNode([RUNNER, "trace", "import", out, "-o", back]);
      assert.equal(imp.code, 0, imp.stderr);
      assert.deepEqual(await jobShape(back, W), await jobShape(file, W), name);
      assert.doesNotMatch(imp.stdout, /replay as float16/, name);
      // The summary's table names ops as the job does.
      for (const row of imp.stdout.split("\n").filter((l) => /^ {2}\S+ +\d+ ×/.test(l))) assert.match(row, /^ {2}[a-z_]+ /, `${name}: ${row}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("Kineto before PyTorch 2.2 without a world size: --world gives reduce_scatter the same input as distributedInfo's world does", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-trace-noworld-"));
  try {
    const doc = JSON.parse(etText("kineto-pre2.2-w8/worker3.pt.trace.json"));
    delete doc.distributedInfo.world_size;
    const file = path.join(dir, "worker3.json");
    writeFileSync(file, JSON.stringify(doc));
    const bare = await imported([file], { world: 8 }), recorded = await imported([fixture("kineto-pre2.2-w8")]);
    assert.deepEqual(stageShape(bare.job), stageShape(recorded.job));
    assert.deepEqual(stageShape(bare.job).find((s) => s.op === "reduce_scatter").tensor, { dtype: "float16", count: 4096 });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
