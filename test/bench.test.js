// `npm run bench` (bench/run.mjs): the harness runs end to end in its smoke mode against Open MPI (and
// OSU 5.3 where its tarball is at the default path: it builds in seconds), writes its JSON where it is
// told, renders its Markdown section into a copy of docs/bench-shm-vs-ompi.md and leaves the real one (and
// bench/results) alone; bad flags are one-line errors; the memory bound's formula and OSU's size mapping
// and output parsing are checked against hand-worked values and a captured sample. Timing targets are
// reported by the bench, never asserted here. Needs mpicc and mpirun; skipped with the reason without
// them, except in CI (CI set), where that is a failure.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { formulaMarkdown, memoryBound, OPS, TRAFFIC } from "../bench/bounds.mjs";
import { OSU_DEFAULT } from "../bench/lib/options.mjs";
import { osuChains, osuCommands, osuSize, parseOsu, prepareOsu } from "../bench/lib/osu.mjs";
import { buildTools, cpuTicks, runOmpi, runOurs, stealShare } from "../bench/lib/peers.mjs";
import { jobFor, peerOrder, planGroups, pointFor } from "../bench/lib/plan.mjs";
import { tcpTable } from "../bench/tcp.mjs";
import { aboveBound, BEGIN, END, evaluateTargets, formatTable, summarize, tableNotes, unsteady, updateDocs, wavering } from "../bench/lib/report.mjs";
import { REPO, runNode } from "./helpers/ranks.js";

const BENCH = path.join(REPO, "bench/run.mjs");
const DOCS = path.join(REPO, "docs/bench-shm-vs-ompi.md");
const RESULTS = path.join(REPO, "bench/results");
/** A full run of 2026-11-26 08:28–08:44 UTC with a slow spell of ours, from before the core probe (kept as a fixture). */
const SPELL_RUN = path.join(REPO, "test/fixtures/bench/2026-11-26T08-44-16-075Z.json");

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
    [["--backend", "mpi", "--launcher", "launch"], /^bench: --launcher: the mpi backend runs under mpirun only\n$/],
  ]) {
    const p = await bench(args, 30_000);
    assert.equal(p.code, 2, `${args.join(" ")}: ${p.stderr}`);
    assert.match(p.stderr, pattern, args.join(" "));
    assert.equal(p.stderr.trim().split("\n").length, 1, `one line for ${args.join(" ")}`);
  }
});

test("sizes follow results.json; both peers get the same counts", () => {
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

});

test("the peers' order: each goes first equally often, and none always follows the same one", () => {
  for (const peers of [["ours", "ompi"], ["ours", "ompi", "osu"], ["ours", "ompi", "control", "osu"], ["ours", "ompi", "control", "launch", "osu"]]) {
    const n = peers.length;
    const orders = Array.from({ length: 2 * n }, (_, k) => peerOrder(peers, k));
    for (const o of orders) assert.deepEqual([...o].sort(), [...peers].sort(), "every peer once");
    for (const p of peers) assert.equal(orders.filter((o) => o[0] === p).length, 2, `${p} first twice in ${2 * n}`);
    if (n < 3) continue;
    for (const p of peers) {
      const before = new Set(orders.map((o) => o[o.indexOf(p) - 1]).filter(Boolean));
      assert.ok(before.size >= 2, `${p} follows ${[...before]} only (${n} peers)`);
    }
  }
  assert.deepEqual(peerOrder(["a", "b", "c", "d"], 0), ["a", "b", "c", "d"]);
  assert.deepEqual(peerOrder(["a", "b", "c", "d"], 1), ["b", "a", "d", "c"]);
});

const MiB = 1024 * 1024;
const near = (a, b, what) => assert.ok(Math.abs(a - b) < 1e-9 * Math.max(1, Math.abs(b)), `${what}: ${a} vs ${b}`);

test("the memory bound counts every private input read and output written, at a copy's best rate", () => {
  // Traffic summed over ranks, by hand at W = 3, S = 12: allreduce 3 inputs + 3 outputs of 12; reduce_scatter
  // 3 × 12 read + 3 × 4 written; all_gather 3 × 4 read + 3 × 12 written; gather 3 × 4 read + 12 at the root;
  // all_to_all like allreduce; broadcast the root's 12 read + 2 × 12 written.
  assert.deepEqual(Object.fromEntries(OPS.map((op) => [op, TRAFFIC[op].bytes(3, 12)])), { allreduce: 72, reduce_scatter: 48, all_gather: 48, gather: 24, all_to_all: 72, broadcast: 36 });

  const S = 64 * MiB;
  const bound = (op, W, extra = {}) => memoryBound({ op, W, bytes: S, cores: 2, bw: { 1: 10e9, 2: 16e9 }, cacheBytes: 32 * MiB, ...extra });
  // One byte copied is two of traffic, so t_min = traffic / (2 × 16e9) with two copiers; busbw = factor × S / t_min.
  // allreduce W=2: 4S / 32e9, factor 1: 8 GB/s.
  near(bound("allreduce", 2).busbw, 8, "allreduce W=2");
  near(bound("allreduce", 2).t_min_us, (4 * S) / 32e9 * 1e6, "allreduce W=2 t_min");
  // reduce_scatter and all_gather W=4: 5S / 32e9, factor 3/4: 4.8 GB/s.
  near(bound("reduce_scatter", 4).busbw, 4.8, "reduce_scatter W=4");
  near(bound("all_gather", 4).busbw, 4.8, "all_gather W=4");
  // gather W=4: 2S / 32e9, factor 3/4: 12 GB/s. all_to_all W=4: 8S / 32e9, factor 3/4: 3 GB/s.
  near(bound("gather", 4).busbw, 12, "gather W=4");
  near(bound("all_to_all", 4).busbw, 3, "all_to_all W=4");
  // broadcast W=8: 8S / 32e9, factor 1: 4 GB/s.
  near(bound("broadcast", 8).busbw, 4, "broadcast W=8");
  // The best rate of any k ≤ min(W, cores): a faster single copier counts; a second copier needs a second core.
  near(bound("allreduce", 2, { bw: { 1: 20e9, 2: 16e9 } }).busbw, 10, "best k");
  near(bound("allreduce", 2, { cores: 1 }).busbw, 5, "one core");
  // Under 2 × the last-level cache there is no bound: gather W=2 of 16 MiB touches 32 MiB; allreduce 64 MiB.
  assert.equal(memoryBound({ op: "gather", W: 2, bytes: 16 * MiB, cores: 2, bw: { 1: 10e9 }, cacheBytes: 32 * MiB }), null);
  assert.ok(memoryBound({ op: "allreduce", W: 2, bytes: 16 * MiB, cores: 2, bw: { 1: 10e9 }, cacheBytes: 32 * MiB }));
  for (const op of OPS) assert.ok(formulaMarkdown().includes(`| ${op} |`), op);

  // A row above its bound is named, with the peer, not clamped.
  const row = (f) => ({ op: "allreduce", W: 2, bytes: S, ours: { fraction_of_bound: f }, ompi: { fraction_of_bound: 0.5 }, osu: null });
  assert.deepEqual(aboveBound([row(0.9)]), []);
  assert.deepEqual(aboveBound([row(1.2)]), ["ours allreduce W=2 64 MiB at 120%"]);
});

// What osu_allgather -f printed here (W = 2), with the header OSU writes.
const OSU_SAMPLE = `
# OSU MPI Allgather Latency Test v5.3
# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations
4                       0.61              0.27              0.95          10
8                       0.52              0.31              0.73          10
32768                  12.40             11.95             12.85         200
`;

test("OSU: sizes map to each benchmark's -m, runs chain by powers of two, and -f output parses", () => {
  // Our S is the tensor for allreduce and broadcast and one rank's input for reduce_scatter (OSU: the float
  // send buffer); the whole output for all_gather and gather, one rank's input for all_to_all (OSU: what one
  // rank sends, or sends to each peer: S / W).
  const W = 4;
  const mapped = Object.fromEntries(OPS.map((op) => [op, osuSize(pointFor(op, W, MiB))]));
  assert.deepEqual(mapped, { allreduce: MiB, reduce_scatter: MiB, all_gather: MiB / 4, gather: MiB / 4, all_to_all: MiB / 4, broadcast: MiB });
  assert.equal(osuSize(pointFor("all_gather", 3, 8)), 4, "one float per rank at 8 B");
  assert.deepEqual(osuChains([1024, 8, 64, 16, 256]), [{ min: 8, max: 1024 }]);
  assert.deepEqual(osuChains([12, 40, 24]), [{ min: 12, max: 24 }, { min: 40, max: 40 }]);

  const group = { id: "g", W: 2, warmup: 7, iterations: 11, points: [pointFor("all_gather", 2, 8), pointFor("all_gather", 2, 64 * 1024), pointFor("allreduce", 2, 8)] };
  const cmds = osuCommands(group, "/osu");
  assert.deepEqual(cmds.map((c) => [c.op, c.argv.slice(c.argv.indexOf("-np") + 1).join(" ")]), [
    ["all_gather", "2 /osu/osu_allgather -f -m 4:32768 -i 11 -x 7"],
    ["allreduce", "2 /osu/osu_allreduce -f -m 8:8 -i 11 -x 7"],
  ]);
  // Past OSU's 512 MiB default, -M asks for what the point needs (all_to_all: S / W to each of W peers).
  const big = osuCommands({ id: "b", W: 2, warmup: 1, iterations: 1, points: [pointFor("all_to_all", 2, 1024 * MiB)] }, "/osu")[0].argv;
  assert.deepEqual(big.slice(big.indexOf("-M")), ["-M", String(1024 * MiB)]);

  const rows = parseOsu(OSU_SAMPLE);
  assert.deepEqual([...rows.keys()], [4, 8, 32768]);
  assert.deepEqual(rows.get(32768), { avg_us: 12.4, min_us: 11.95, max_us: 12.85, iterations: 200 });
  assert.equal(parseOsu("# OSU MPI Allgather Latency Test v5.3\n").size, 0);

  // A source that is not there is one line, which the bench prints before going on without OSU.
  assert.throws(() => prepareOsu("/nonexistent/osu.tar.gz", () => {}), /^Error: \/nonexistent\/osu\.tar\.gz not found$/);
  const empty = mkdtempSync(path.join(os.tmpdir(), "bench-osu-"));
  try {
    assert.throws(() => prepareOsu(empty, () => {}), new RegExp(`^Error: ${empty} has neither the osu_\\* programs nor a configure script$`));
  } finally {
    rmSync(empty, { recursive: true, force: true });
  }
});

test("bench/tcp's table: iperf3 each way, Open MPI and OSU beside ours, and no column for a peer that did not run", () => {
  const G = 1e9;
  const all = [{ link: "veth", W: 2, iperf: [2 * G, 1 * G], iperfEven: 1.2 * G, ours: 1.5 * G, ompi: 1.2 * G, osu: 3 * G }];
  const lines = tcpTable(all).split("\n");
  assert.equal(lines[0], "| link | ranks | iperf3 --bidir each way (GB/s) | ours busbw (GB/s) | Open MPI busbw (GB/s) | OSU busbw (GB/s) | ours / iperf3 each way (mean) | ours / Open MPI | ours / OSU |");
  assert.equal(lines[2], "| veth | 2 hosts × 1 | 2.000, 1.000 | 1.500 | 1.200 | 3.000 | 0.75, 1.50 (1.25) | 1.25 | 0.50 |");
  const alone = tcpTable([{ link: "tbf", W: 2, ours: 0.119 * G }]).split("\n");
  assert.equal(alone[0], "| link | ranks | ours busbw (GB/s) |");
  assert.equal(alone[2], "| tbf | 2 hosts × 1 | 0.119 |");
});

test("a time whose repeats differ by more than 2× is marked ‡, a steady one is not", () => {
  // W=2 allreduce 16 MiB took 2116, 8194 and 8075 µs in SPELL_RUN.
  const { rows } = JSON.parse(readFileSync(SPELL_RUN, "utf8"));
  const row = (W, op, nominal) => rows.find((r) => r.W === W && r.op === op && r.nominal === nominal);
  const spell = row(2, "allreduce", 16 * 2 ** 20), steady = row(2, "allreduce", 2 ** 20);
  assert.ok(unsteady(spell.ours.time_us) && !unsteady(spell.ompi.time_us) && !unsteady(steady.ours.time_us));
  const [, steadyLine, spellLine] = formatTable([steady, spell]).split("\n");
  assert.match(spellLine, /^2\s+allreduce\s+16 MiB\s+\S+\s+[\d.]+‡\s+[\d.]+\s/);
  assert.doesNotMatch(steadyLine ?? "", /‡/);
  const v = (...by_repeat) => ({ by_repeat, min: Math.min(...by_repeat), max: Math.max(...by_repeat) });
  assert.ok(unsteady(v(10, 20.1)) && !unsteady(v(10, 20)) && !unsteady(v(90)) && !unsteady(v(0.2, 0.5)), "2× apart, from 10 µs, over 2 repeats or more");
});

test("a row whose per-round ratios lie more than 1.5× apart wavers (its invocation gets the extra rounds)", () => {
  const row = (...by_repeat) => ({ pairs: by_repeat.length, ratio: { by_repeat, min: Math.min(...by_repeat), max: Math.max(...by_repeat) } });
  assert.ok(wavering(row(1.0, 1.51)) && wavering(row(2.9, 1.2, 3.0)));
  assert.ok(!wavering(row(1.0, 1.5)) && !wavering(row(0.4)) && !wavering(row(1.2, 1.3, 1.1)));
});

test("our invocations whose start-ups timed the ranks' cores apart as two machines are counted in the notes", () => {
  const doc = JSON.parse(readFileSync(SPELL_RUN, "utf8"));
  const note = (d) => tableNotes(d).find((l) => l.startsWith("Our invocations' start-ups"));
  assert.equal(note(doc), undefined, "a run from before the probe");
  const ours = doc.invocations.filter((v) => v.peer === "ours");
  ours.forEach((v, i) => (v.core_round_trip_ns = [i === 0 ? 320.5 : 50 + (i % 3)]));
  assert.equal(note(doc), `Our invocations' start-ups timed the ranks' cores apart by more than one machine's round trip (core_round_trip_ns per invocation in the JSON; docs/DESIGN.md, "The verdict"): our invocations that timed it: ${ours.length - 1} at 50-52 ns, 1 at 321 ns. The peers beside them met the same machine.`);
  ours.forEach((v) => (v.core_round_trip_ns = [50]));
  assert.equal(note(doc), undefined, "one machine: nothing to say");
});

test("invocations during which the hypervisor stole 2% of the CPU or more are counted per peer in the notes", () => {
  const doc = JSON.parse(readFileSync(SPELL_RUN, "utf8"));
  const note = (d) => tableNotes(d).find((l) => l.startsWith("The hypervisor"));
  assert.equal(note(doc), undefined, "a run from before steal was recorded");
  doc.invocations = doc.invocations.map((v, i) => ({ ...v, steal: i === 0 ? 0.031 : i === 1 ? 0.0199 : i === 2 ? null : 0 }));
  const peer = doc.invocations[0].peer;
  const counts = { ours: 0, ompi: 0, osu: 0, [peer]: 1 };
  assert.equal(note(doc), `The hypervisor took 2% or more of the CPU time (steal in /proc/stat) during ${counts.ours} of ours, ${counts.ompi} of Open MPI's and ${counts.osu} of OSU's invocations (at most 3%; steal per invocation in the JSON): their times are the machine's as much as the peer's.`);
  const ticks = cpuTicks();
  assert.ok(ticks && ticks.total > 0 && ticks.steal >= 0 && ticks.steal <= ticks.total, JSON.stringify(ticks));
  assert.equal(stealShare({ total: 100, steal: 1 }, { total: 300, steal: 11 }), 0.05);
  assert.equal(stealShare(null, ticks), null);
});

test("--backend mpi: the control (Open MPI's own again) is counted against the target, and widens it only by its own distance", () => {
  // Three 8-byte rows at W = 2, one round; Open MPI's own takes 10 µs on each, so the target allows 12.
  // A: ours 12.5 misses, but the control took 13 (1.3×): within 12 × 1.3. B: ours 20 misses, the control 10
  // agrees with Open MPI's: a miss beyond the control. C: ours 10.5 holds; the control 9 (0.9×) too.
  const ops = ["allreduce", "all_gather", "broadcast"];
  const group = { id: "w2-band0", W: 2, isolated: false, warmup: 2, iterations: 5, points: ops.map((op) => pointFor(op, 2, 8)) };
  const times = { ours: [12.5, 20, 10.5], ompi: [10, 10, 10], control: [13, 10, 9] };
  const invocations = Object.entries(times).map(([peer, us]) => ({
    group: group.id, repeat: 0, peer, max_rss_kib: [1000, 1000],
    points: us.map((t) => ({ algorithm: "mpi", time: { avg_us: t }, per_rank_avg_us: [t, t] })),
  }));
  const rows = summarize([group], invocations, { cores: 2, bw: { 1: 1e10, 2: 1.6e10 }, cacheBytes: 32 * MiB });
  assert.deepEqual(rows.map((r) => [r.op, r.control.time_us.median, r.control.time_ratio.median]), [["allreduce", 13, 1.3], ["all_gather", 10, 1], ["broadcast", 9, 0.9]]);
  const [literal, controlled] = evaluateTargets(rows, null, "mpi");
  assert.equal(literal.verdict, "FAIL");
  assert.match(literal.detail, /^2 of 3 rows miss it, worst first: all_gather W=2 8 B 20\.0 vs 10\.0 µs; allreduce W=2 8 B 12\.5 vs 10\.0 µs; Open MPI's own run again \(the control\) misses it on 1 of 3 rows$/);
  assert.deepEqual(literal.control_failing, ["allreduce W=2 8 B 13.0 vs 10.0 µs"]);
  assert.equal(controlled.verdict, "FAIL");
  assert.deepEqual(controlled.failing, ["all_gather W=2 8 B 20.0 vs 10.0 µs, control 1.00×"]);
  assert.match(formatTable(rows).split("\n")[0], /ctl vs ompi/);
  // Without a control: the literal target alone, and no control column.
  const alone = summarize([group], invocations.filter((v) => v.peer !== "control"), { cores: 2, bw: { 1: 1e10 }, cacheBytes: 32 * MiB });
  assert.equal(evaluateTargets(alone, null, "mpi").length, 1);
  assert.doesNotMatch(formatTable(alone), /ctl vs ompi/);
});

test("--launcher mpirun: shm under mpirun is judged against shm under `runner launch` in the same rounds", () => {
  // Two rows, two rounds. allreduce: 10/12 µs under mpirun against 10/10 under launch: ratios 1.0 and 1.2,
  // median 1.1, holds. broadcast: 13 and 14 against 10: 1.3 and 1.4, misses.
  const group = { id: "w2-band0", W: 2, isolated: false, warmup: 2, iterations: 5, points: ["allreduce", "broadcast"].map((op) => pointFor(op, 2, 8)) };
  const times = { ours: [[10, 13], [12, 14]], ompi: [[5, 5], [5, 5]], launch: [[10, 10], [10, 10]] };
  const invocations = Object.entries(times).flatMap(([peer, rounds]) => rounds.map((us, repeat) => ({
    group: group.id, repeat, peer, max_rss_kib: [1000, 1000],
    points: us.map((t) => ({ algorithm: "ring", time: { avg_us: t }, per_rank_avg_us: [t, t] })),
  })));
  const rows = summarize([group], invocations, { cores: 2, bw: { 1: 1e10, 2: 1.6e10 }, cacheBytes: 32 * MiB });
  assert.deepEqual(rows.map((r) => [r.op, r.launch.time_us.median, r.launch.time_ratio.median]), [["allreduce", 10, 1.1], ["broadcast", 10, 1.35]]);
  const targets = evaluateTargets(rows, null, "shm");
  assert.deepEqual(targets.map((t) => [t.id, t.verdict, t.failing]), [["shm-under-mpirun", "FAIL", ["broadcast W=2 8 B 13.5 vs 10.0 µs = 1.35×"]]]);
  assert.match(formatTable(rows).split("\n")[0], /launch µs/);
});

test("the generated section replaces only what lies between its markers", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "bench-docs-"));
  try {
    const file = path.join(dir, "bench-shm-vs-ompi.md");
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
    const docs = path.join(dir, "bench-shm-vs-ompi.md");
    copyFileSync(DOCS, docs);
    const docsBefore = readFileSync(DOCS, "utf8");
    const docsMtime = statSync(DOCS).mtimeMs;
    const resultsBefore = listing(RESULTS);
    const out = path.join(dir, "out");
    // OSU builds into bench/build/osu in seconds (once) where its tarball is; elsewhere the bench goes on without it.
    const osu = existsSync(OSU_DEFAULT);
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
      // The report's bound is bench/bounds.mjs's from this run's memcpy rates and cache.
      const bw = Object.fromEntries(Object.entries(doc.memcpy.bw_agg_gbs).map(([k, v]) => [k, v * 1e9]));
      const expected = memoryBound({ op: r.op, W: r.W, bytes: r.bytes, cores: doc.machine.cores, bw, cacheBytes: doc.memcpy.cache_bytes });
      assert.deepEqual(r.memory_bound, expected, `${name}: memory bound`);
      if (expected) near(r.ours.fraction_of_bound, r.ours.busbw.median / expected.busbw, `${name}: % of bound`);
      else assert.equal(r.ours.fraction_of_bound, null, `${name}: no bound, no fraction`);
      if (osu) {
        assert.equal(r.osu.ratio.by_repeat.length, 1, `${name}: one OSU pair`);
        near(r.osu.ratio.median, r.osu.time_us.median / r.ours.max_rank_mean_us.median, `${name}: OSU's Max Latency over ours`);
        assert.ok(r.osu.time_us.median > 0, `${name}: OSU time`);
      } else assert.equal(r.osu, null, `${name}: no OSU`);
    }
    const peers = new Set(doc.invocations.map((v) => v.peer));
    assert.deepEqual([...peers].sort(), osu ? ["ompi", "osu", "ours"] : ["ompi", "ours"]);
    assert.ok(doc.invocations.every((v) => !v.error), "no invocation failed");
    assert.ok(doc.idle_rss.ours.max > 0 && doc.idle_rss.ompi.max > 0, "idle RSS both sides");
    assert.deepEqual(doc.targets.map((t) => t.id), ["busbw-w2-4", "busbw-w8", "latency", "memory-bound", "memory"]);
    for (const t of doc.targets) assert.ok(["PASS", "FAIL", "N/A"].includes(t.verdict), t.id);

    // stdout: the table and one verdict line per target.
    const osuColumns = osu ? "osu µs\\s+vs osu \\(min–max\\)\\s+" : "";
    assert.match(p.stdout, new RegExp(`^W\\s+op\\s+size\\s+algo\\s+ours µs\\s+ompi µs\\s+ours GB/s\\s+ompi GB/s\\s+vs ompi \\(min–max\\)\\s+${osuColumns}bound GB/s\\s+ours % of bound\\s+ompi % of bound\\s+ours RSS MiB`, "m"));
    // Without OSU the bench says so in one line and goes on.
    assert.equal(p.stderr.match(/OSU 5\.3 unavailable, going on without its column: /g)?.length ?? 0, osu ? 0 : 1, p.stderr);
    assert.equal(p.stdout.match(/^(PASS|FAIL|N\/A) /gm)?.length, 5);

    // The section went into the copy, after the page's untouched hand-written head; the real page and
    // bench/results are as they were.
    const md = readFileSync(docs, "utf8");
    assert.equal(md.split(BEGIN).length, 2);
    assert.equal(md.split(END).length, 2);
    assert.ok(md.indexOf(BEGIN) < md.indexOf(END));
    assert.ok(docsBefore.indexOf(BEGIN) > 0 && md.startsWith(docsBefore.slice(0, docsBefore.indexOf(BEGIN))), "the head is untouched");
    const section = md.slice(md.indexOf(BEGIN), md.indexOf(END));
    assert.match(section, /## shm backend against Open MPI/);
    assert.match(section, /node bench\/run\.mjs --smoke/);
    assert.match(section, /\| W \| op \| size \| algo \|/);
    assert.match(section, /t_min {7}= traffic\(op, W, S\) \/ \(2 × BW_mem\(min\(W, cores\)\)\)/);
    assert.match(section, /\| bound GB\/s \| ours % of bound \| ompi % of bound \|/);
    assert.match(section, osu ? /OSU micro-benchmarks 5\.3 \(built from/ : /OSU micro-benchmarks 5\.3 did not run: unavailable/);
    assert.match(section, /\*\*(PASS|FAIL|N\/A)\*\* 8-byte latency/);
    assert.equal(readFileSync(DOCS, "utf8"), docsBefore, "docs/bench-shm-vs-ompi.md untouched");
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
      const ours = await runOurs(group, dir, `p${pair}`, 120, { backend: "mpi", launcher: "mpirun" });
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
