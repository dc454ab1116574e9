// `npm run bench` (bench/run.mjs): the harness runs end to end in its smoke mode against Open MPI, writes
// its JSON where it is told, renders its Markdown section into a copy of docs/PERFORMANCE.md and leaves
// the real one (and bench/results) alone; bad flags are one-line errors. Timing targets are reported by
// the bench, never asserted here. Needs mpicc and mpirun; skipped with the reason without them, except in
// CI (CI set), where that is a failure.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { ceiling, COPIES, formulaMarkdown } from "../bench/bounds.mjs";
import { buildTools, runOmpi, runOurs } from "../bench/lib/peers.mjs";
import { jobFor, planGroups, pointFor } from "../bench/lib/plan.mjs";
import { BEGIN, END, updateDocs } from "../bench/lib/report.mjs";
import { REPO, runNode } from "./helpers/ranks.js";

const BENCH = path.join(REPO, "bench/run.mjs");
const DOCS = path.join(REPO, "docs/PERFORMANCE.md");
const RESULTS = path.join(REPO, "bench/results");

function unavailable() {
  for (const tool of ["mpicc", "mpirun", "cc"]) {
    if (spawnSync("sh", ["-c", `command -v ${tool}`]).status !== 0) return `${tool} not found (install openmpi-bin, libopenmpi-dev and gcc)`;
  }
  return undefined;
}
const missing = unavailable();
if (missing && !process.env.CI) console.log(`# bench.test.js skipped: ${missing}`);

const bench = (args, timeoutMs = 240_000) => runNode([BENCH, ...args], {}, timeoutMs);

const listing = (dir) => (existsSync(dir) ? readdirSync(dir).sort() : []);

test("bad flags are one line on stderr and exit code 2", async () => {
  for (const [args, pattern] of [
    [["--bogus"], /^bench: Unknown argument: bogus \(see --help\)\n$/],
    [["--repeats", "0"], /^bench: --repeats: .*>=1\n$/],
    [["--sizes", "8", "4Q"], /^bench: --sizes \(value 2\): expected a size like 4096/],
    [["--ops", "allreduce", "nope"], /^bench: --ops \(value 2\): .*expected one of/],
    [["--quick", "--smoke"], /^bench: Arguments quick and smoke are mutually exclusive/],
    [["--backend", "nccl"], /^bench: --backend: .*expected one of "shm"\|"mpi"\n$/],
    [["--world-sizes", "1"], /^bench: --world-sizes \(value 1\): /],
  ]) {
    const p = await bench(args, 30_000);
    assert.equal(p.code, 2, `${args.join(" ")}: ${p.stderr}`);
    assert.match(p.stderr, pattern, args.join(" "));
    assert.equal(p.stderr.trim().split("\n").length, 1, `one line for ${args.join(" ")}`);
  }
});

test("sizes follow results.json; both peers get the same counts; the ceiling follows bench/bounds.mjs", () => {
  // allreduce and broadcast: the tensor; reduce_scatter and all_to_all: input per rank, a multiple of W;
  // all_gather and gather: the whole output, W x the input.
  assert.deepEqual(pointFor("allreduce", 4, 1 << 20), { op: "allreduce", W: 4, nominal: 1 << 20, count: 1 << 18, bytes: 1 << 20 });
  assert.deepEqual(pointFor("all_gather", 4, 1 << 20), { op: "all_gather", W: 4, nominal: 1 << 20, count: 1 << 16, bytes: 1 << 20 });
  assert.deepEqual(pointFor("reduce_scatter", 8, 8), { op: "reduce_scatter", W: 8, nominal: 8, count: 8, bytes: 32 });
  assert.deepEqual(pointFor("gather", 8, 8), { op: "gather", W: 8, nominal: 8, count: 1, bytes: 32 });
  const s = { worldSizes: [2, 8], ops: ["allreduce", "gather"], sizes: [8, 1024, 1 << 20], bandEdges: [4096], isolateFrom: 1 << 20, budget: 1 << 24, minIters: 5, maxIters: 100 };
  const groups = planGroups(s);
  assert.deepEqual(groups.map((g) => g.id), ["w2-band0", "w2-allreduce-1048576", "w2-gather-1048576", "w8-band0", "w8-allreduce-1048576", "w8-gather-1048576"]);
  assert.deepEqual([groups[0].iterations, groups[1].iterations], [100, 16]);
  const job = jobFor(groups[0], 60);
  assert.deepEqual(job.stages.map((st) => st.op), ["allreduce", "barrier", "gather", "barrier", "allreduce", "barrier", "gather"]);
  assert.equal(job.check, false);

  const bw = (k) => (k === 1 ? 10e9 : 16e9);
  // allreduce W=2: copies = 1 (read S, write S), so t_min = 2 * 1 * S / BW(2) and busbw = 1 * S / t_min = BW / 2.
  assert.ok(Math.abs(ceiling({ op: "allreduce", W: 2, bytes: 1 << 26, algorithm: "shared", cores: 2, bw }).busbw - 8) < 1e-9);
  // gather W=4: the root alone, t_min = (1 + 1/4)/2 * S / BW(1); busbw = 3/4 * BW(1) / 0.625 = 12 GB/s.
  assert.ok(Math.abs(ceiling({ op: "gather", W: 4, bytes: 1 << 26, algorithm: "shared", cores: 2, bw }).busbw - 12) < 1e-9);
  // broadcast W=8: copies 1/2, t_min = 8 * S / 2 / BW(2); busbw = S / t_min = BW(2) / 4.
  assert.ok(Math.abs(ceiling({ op: "broadcast", W: 8, bytes: 1 << 26, algorithm: "shared", cores: 2, bw }).busbw - 4) < 1e-9);
  assert.equal(ceiling({ op: "allreduce", W: 2, bytes: 1 << 26, algorithm: "ring", cores: 2, bw }), null);
  for (const op of Object.keys(COPIES)) assert.ok(formulaMarkdown().includes(`| ${op} |`), op);
});

test("the generated section replaces only what lies between its markers", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "bench-docs-"));
  try {
    const file = path.join(dir, "PERFORMANCE.md");
    copyFileSync(DOCS, file);
    const original = readFileSync(file, "utf8");
    updateDocs(file, `${BEGIN}\nbench-test-first-render\n${END}`);
    updateDocs(file, `${BEGIN}\nbench-test-second-render\n${END}`);
    const text = readFileSync(file, "utf8");
    const begin = text.indexOf(BEGIN);
    assert.equal(text.split(BEGIN).length, 2, "one begin marker");
    assert.ok(text.includes(`${BEGIN}\nbench-test-second-render\n${END}`));
    assert.ok(!text.includes("bench-test-first-render"));
    if (original.includes(BEGIN)) {
      assert.equal(text.slice(0, begin), original.slice(0, original.indexOf(BEGIN)));
      assert.equal(text.slice(text.indexOf(END)), original.slice(original.indexOf(END)));
    } else {
      assert.equal(text.slice(0, begin).trimEnd(), original.trimEnd());
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("--smoke runs both peers and writes its JSON and Markdown only where told", { skip: missing && !process.env.CI ? missing : false, timeout: 300_000 }, async () => {
  if (missing) assert.fail(`CI must run the bench test: ${missing}`);
  const dir = mkdtempSync(path.join(os.tmpdir(), "bench-smoke-"));
  try {
    const docs = path.join(dir, "PERFORMANCE.md");
    copyFileSync(DOCS, docs);
    const docsBefore = readFileSync(DOCS, "utf8");
    const docsMtime = statSync(DOCS).mtimeMs;
    const resultsBefore = listing(RESULTS);
    const out = path.join(dir, "out");
    const p = await bench(["--smoke", "--out", out, "--docs", docs]);
    assert.equal(p.code, 0, p.stderr);

    const files = readdirSync(out);
    assert.equal(files.length, 1, `one results file: ${files}`);
    assert.match(files[0], /^\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z\.json$/);
    const doc = JSON.parse(readFileSync(path.join(out, files[0]), "utf8"));
    assert.equal(doc.command, `node bench/run.mjs --smoke --out ${out} --docs ${docs}`);
    assert.ok(doc.machine.cores >= 1 && doc.machine.cpu_model && doc.machine.kernel && doc.machine.node);
    assert.match(doc.machine.open_mpi ?? "", /Open MPI|mpirun|MPI/i);
    assert.ok(doc.memcpy.bw_agg_gbs[1] > 0, "memcpy bandwidth measured");

    // W = 2, allreduce and all_gather at 8 B and 64 KiB: four rows, each with both peers' numbers.
    assert.deepEqual(doc.rows.map((r) => `${r.W} ${r.op} ${r.nominal}`), ["2 allreduce 8", "2 all_gather 8", "2 allreduce 65536", "2 all_gather 65536"]);
    for (const r of doc.rows) {
      const name = `${r.op} ${r.nominal}`;
      assert.equal(r.pairs, 1, name);
      assert.ok(r.ours.busbw.median > 0 && r.ompi.busbw.median > 0, `${name}: positive busbw both sides`);
      assert.ok(Number.isFinite(r.ratio.median) && r.ratio.median > 0, `${name}: finite ratio`);
      assert.ok(Number.isFinite(r.time_ratio.median), `${name}: finite latency ratio`);
      assert.ok(r.ours.max_rss_kib.median > 1024 && r.ompi.max_rss_kib.median > 1024, `${name}: RSS both sides`);
      assert.ok(typeof r.algorithm === "string" && r.algorithm.length > 0, `${name}: our algorithm`);
      if (r.algorithm !== "shared") assert.equal(r.ceiling, null, `${name}: no ceiling for ${r.algorithm}`);
    }
    const peers = new Set(doc.invocations.map((v) => v.peer));
    assert.deepEqual([...peers].sort(), ["ompi", "ours"]);
    assert.ok(doc.invocations.every((v) => !v.error), "no invocation failed");
    assert.ok(doc.idle_rss.ours.max > 0 && doc.idle_rss.ompi.max > 0, "idle RSS both sides");
    assert.deepEqual(doc.targets.map((t) => t.id), ["busbw-w2-4", "busbw-w8", "latency", "ceiling", "memory"]);
    for (const t of doc.targets) assert.ok(["PASS", "FAIL", "N/A"].includes(t.verdict), t.id);

    // stdout: the table and one verdict line per target.
    assert.match(p.stdout, /^W\s+op\s+size\s+algo\s+ours µs\s+ompi µs\s+ours GB\/s\s+ompi GB\/s\s+ratio/m);
    assert.equal(p.stdout.match(/^(PASS|FAIL|N\/A) /gm)?.length, 5);

    // The section went into the copy, after the untouched 1-bit section; the real docs and bench/results
    // are as they were.
    const md = readFileSync(docs, "utf8");
    assert.equal(md.split(BEGIN).length, 2);
    assert.equal(md.split(END).length, 2);
    assert.ok(md.indexOf(BEGIN) < md.indexOf(END));
    const oneBit = docsBefore.slice(docsBefore.indexOf("## 1-bit compressed allreduce"));
    const oneBitEnd = oneBit.includes(BEGIN) ? oneBit.indexOf(BEGIN) : oneBit.length;
    assert.ok(md.includes(oneBit.slice(0, oneBitEnd).trimEnd()), "the 1-bit section is untouched");
    const section = md.slice(md.indexOf(BEGIN), md.indexOf(END));
    assert.match(section, /## shm backend against Open MPI/);
    assert.match(section, /node bench\/run\.mjs --smoke/);
    assert.match(section, /\| W \| op \| size \| algo \|/);
    assert.match(section, /t_min {9}= W × copies\(op, W\) × S \/ BW_agg\(min\(W, cores\)\)/);
    assert.match(section, /\*\*(PASS|FAIL|N\/A)\*\* 8-byte latency/);
    assert.equal(readFileSync(DOCS, "utf8"), docsBefore, "docs/PERFORMANCE.md untouched");
    assert.equal(statSync(DOCS).mtimeMs, docsMtime);
    assert.deepEqual(listing(RESULTS), resultsBefore, "bench/results untouched");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// Issue #32's one CI guard (the bench holds the tight target): the mpi backend runs MPI's own collective,
// so under mpirun it costs about what MPI does. Medians of 200 iterations, in pairs run back to back; the
// best pair of up to 3 decides, so a machine busy with other work does not fail it. Before the blocking
// collectives it was 29× (491 against 17 µs).
test("mpi backend, 64 KiB allreduce at W=2 under mpirun: at most 2× MPI's own time (bench/ompi_coll.c) in the same run", { skip: missing && !process.env.CI ? missing : false, timeout: 180_000 }, async () => {
  buildTools();
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-mpi-guard-"));
  const group = { id: "guard", W: 2, isolated: true, warmup: 50, iterations: 200, points: [pointFor("allreduce", 2, 64 * 1024)] };
  const seen = [];
  try {
    for (let pair = 0; pair < 3 && !seen.some((s) => s.ratio <= 2); pair++) {
      const ours = await runOurs(group, dir, `p${pair}`, 120, "mpi");
      const ompi = await runOmpi(group, 120);
      assert.ok(!ours.error && !ompi.error, ours.error ?? ompi.error);
      const [a, b] = [ours.points[0].time.p50_us, ompi.points[0].time.p50_us];
      seen.push({ ours: a, ompi: b, ratio: a / b });
    }
    const text = seen.map((s) => `${s.ours.toFixed(1)} vs ${s.ompi.toFixed(1)} µs`).join("; ");
    assert.ok(seen.some((s) => s.ratio <= 2), `the mpi backend was more than 2× MPI's own time in every pair: ${text}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
