// Job graphs as graphs (DESIGN.md, "Graphs, streams and groups"): stages on different streams in flight
// together, shown from rank 0's flight record; every op inside groups of every kind, on two and three
// streams, checked element by element against the JS reference and by the runner's own check; and bad
// input stopped with one line and exit 2 before any rank communicates.
import assert from "node:assert/strict";
import { readFileSync, rmSync, writeFileSync, mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { prepareJob, vCounts, verifyDumps } from "./helpers/matrix.js";
import { mpirun, mpiTest } from "./helpers/mpi.js";
import { netnsUnavailable, runSpread, withHosts } from "./helpers/netns.js";
import { REPO, RUNNER, runNode, runRanks } from "./helpers/ranks.js";

const COMPUTE_US = 60_000;
const NCCL_DOUBLE = path.join(REPO, "native/build/doubles/libspmd_nccl_double_full.so");

/** Rank 0's flight record lines (`--log-level debug` prints it after the run) as [stage, step, start, end] in ms. */
function flightIntervals(stderr) {
  const ms = (v, unit) => Number(v) * { us: 1e-3, ms: 1, s: 1e3 }[unit];
  const line = /#\d+ step (\d+) \S+ (\S+) \d+ B.*: done after ([\d.]+) (us|ms|s) \(started ([\d.]+) (us|ms|s) ago\)/g;
  return [...stderr.matchAll(line)].map(([, step, stage, took, u1, ago, u2]) => {
    const start = -ms(ago, u2);
    return { stage, step: Number(step), start, end: start + ms(took, u1) };
  });
}

/** Starts ranks on the nccl backend over the NCCL ABI double. */
const ncclDouble = (world, args) => runRanks(world, args, { env: { NCCL_LIBRARY: NCCL_DOUBLE } });

/** Two stages on different streams are in flight together (rank 0's flight record), and the step reports its overlap. */
async function checkOverlap(backend, launch) {
  const job = {
    name: "streams", iterations: 2, warmup: 1, check: true,
    tensors: { a: { dtype: "float32", count: 4096 } },
    stages: [
      { id: "busy", op: "compute", us: COMPUTE_US },
      { id: "side", op: "compute", us: COMPUTE_US, stream: "s1" },
      { id: "gathered", op: "all_gather", input: "a", stream: "s2" },
      { id: "tail", op: "allreduce", input: "a", after: ["side"] },
    ],
  };
  const { dir, json, run } = prepareJob(2, job, { extraArgs: ["--log-level", "debug", "--backend", backend], ...(launch && { launch }) });
  try {
    const ranks = await run();
    ranks.forEach((p, r) => assert.equal(p.code, 0, `rank ${r} exited ${p.code}: ${p.stderr}`));
    // The record ends with the timed run's last step (the untimed solo pass, all on "main", came first).
    const last = flightIntervals(ranks[0].stderr).filter((e) => e.step === 2);
    const latest = (id) => last.findLast((e) => e.stage === id);
    const [busy, side] = ["busy", "side"].map(latest);
    assert.ok(busy && side, `no flight record of both stages in the last step:\n${ranks[0].stderr}`);
    assert.ok(side.start < busy.end && busy.start < side.end, `not in flight together: ${JSON.stringify({ busy, side })}`);
    const tail = latest("tail");
    assert.ok(tail.start >= side.end - 0.2, `tail (after side) started before side ended: ${JSON.stringify({ side, tail })}`);

    const rows = JSON.parse(readFileSync(json, "utf8")).results;
    assert.deepEqual(rows.map((r) => r.stream ?? "main"), ["main", "s1", "s2", "main"]);
    const { graph } = rows[0];
    assert.ok(graph, "no graph metric on a step of concurrent stages");
    assert.ok(graph.solo_sum_us >= 2 * COMPUTE_US * 0.95, `solo sum ${graph.solo_sum_us}`);
    assert.ok(graph.step_us < graph.solo_sum_us, `step ${graph.step_us} us not shorter than its stages alone (${graph.solo_sum_us} us)`);
    assert.ok(graph.overlap_pct > 0 && graph.overlap_pct <= 100 + 1e-9, `overlap ${graph.overlap_pct}%`);
    assert.equal(graph.critical_path.at(-1), "tail");
    for (const row of rows) assert.ok(row.start_us >= 0, `${row.stage}: start ${row.start_us}`);
    // Checked: the stages that move data (compute has no output to check).
    assert.deepEqual(rows.map((r) => [r.stage, r.wrong]), [["busy", null], ["side", null], ["gathered", 0], ["tail", 0]]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("two stages on different streams are in flight together (rank 0's flight record), and the step reports its overlap", () => checkOverlap("shm"));
test("the same on nccl over the ABI double: each stream's lane its own communicator and thread", () => checkOverlap("nccl", ncclDouble));

test("--solo times the stages alone over the job's own steps; without it, a calibration pass of 5 steps at most", async () => {
  const us = 2000;
  const job = {
    name: "solo", iterations: 7, warmup: 1, check: true,
    tensors: { a: { dtype: "float32", count: 64 } },
    stages: [{ id: "c", op: "compute", us }, { id: "side", op: "allreduce", input: "a", stream: "s1" }],
  };
  for (const [extra, steps] of [[[], 5], [["--solo"], 7]]) {
    const { dir, json, run } = prepareJob(2, job, { extraArgs: extra });
    try {
      const ranks = await run();
      ranks.forEach((p, r) => assert.equal(p.code, 0, `rank ${r} exited ${p.code}: ${p.stderr}`));
      const rows = JSON.parse(readFileSync(json, "utf8")).results;
      assert.deepEqual(rows.map((r) => [r.stage, r.wrong]), [["c", null], ["side", 0]]);
      for (const { graph } of rows) {
        assert.equal(graph.solo_steps, steps, `${extra}: solo steps`);
        assert.ok(graph.solo_max_us >= us * 0.95 && graph.solo_sum_us > graph.solo_max_us, `${extra}: ${JSON.stringify(graph)}`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
});

/** Partitions for W ranks of each kind a job can name, all with groups of one size. */
function groupsFor(W) {
  const k = [2, 3].find((d) => W % d === 0 && W > d) ?? W;
  const explicit = { 2: [[1, 0]], 3: [[2, 0, 1]], 4: [[0, 3], [1, 2]], 5: [[4, 0, 2, 1, 3]], 6: [[0, 5], [4, 1], [2, 3]], 8: [[0, 7, 3, 4], [1, 6, 2, 5]] }[W];
  return { blk: { block: k }, strd: { stride: W / k }, expl: { ranks: explicit }, host: { split: "host" }, across: { split: "across" } };
}

/** The groups of each partition as the runner forms them (one host: every rank on it). */
function partitionsFor(W, groups) {
  const all = Array.from({ length: W }, (_, r) => r);
  const by = (key) => {
    const groups = new Map();
    for (const r of all) groups.set(key(r), [...(groups.get(key(r)) ?? []), r]);
    return [...groups.values()];
  };
  return {
    blk: by((r) => Math.floor(r / groups.blk.block)),
    strd: by((r) => r % groups.strd.stride),
    expl: groups.expl.ranks.map((g) => [...g].sort((a, b) => a - b)),
    host: [all],
    across: all.map((r) => [r]),
  };
}

/** Every exact op in every partition, on `streams` streams round robin (igather on its own), uneven counts. */
function groupsJob(W, streams) {
  const groups = groupsFor(W);
  const tensors = {
    u7: { dtype: "float32", count: 7, fill: { kind: "integers", seed: 3, low: -9, high: 9 } },
    u1003: { dtype: "int32", count: 1003, fill: { kind: "integers", seed: 5, low: -9, high: 9 } },
    d840: { dtype: "float64", count: 840, fill: { kind: "integers", seed: 6, low: -9, high: 9 } },
  };
  const stages = [];
  for (const g of Object.keys(groups)) {
    for (const t of ["u7", "u1003"]) {
      const size = partitionsFor(W, groups)[g][0].length;
      const ops = [
        ["allreduce", {}], ["allreduce", { reduce: "max" }], ["reduce_scatter", {}], ["all_gather", {}],
        ["gather", { root: size - 1 }], ["igather", { root: 0 }], ["broadcast", { root: size - 1 }],
        ["reduce", { root: 0 }], ["scatter", { root: size - 1 }], ["all_to_all", {}], ["send_recv", { shift: 1 }],
        ["all_to_allv", { counts: vCounts(tensors[t].count, size) }],
      ];
      for (const [op, extra] of ops) {
        const stream = op === "igather" ? {} : { stream: streams[stages.length % streams.length] };
        stages.push({ id: `${g}.${t}.${op}${extra.reduce ? `.${extra.reduce}` : ""}`, op, input: t, group: g, ...stream, ...extra });
      }
    }
    // nccl-tests' in-place forms; all_to_all's needs a count its group size divides.
    const size = partitionsFor(W, groups)[g][0].length;
    const inPlace = [["allreduce", "u1003", {}], ["reduce_scatter", "u1003", {}], ["all_gather", "u7", {}],
      ["broadcast", "u1003", { root: size - 1 }], ["reduce", "u7", { root: 0, reduce: "min" }], ["all_to_all", "d840", {}]];
    for (const [op, t, extra] of inPlace) {
      stages.push({ id: `${g}.${t}.${op}.inplace`, op, input: t, group: g, inPlace: true, stream: streams[stages.length % streams.length], ...extra });
    }
  }
  return { job: { name: `groups-${W}`, iterations: 1, warmup: 0, check: true, groups, tensors, stages }, partitions: partitionsFor(W, groups) };
}

/** Runs the groups job and checks every row and every rank's dumped output. */
async function checkGroups(W, streams, backend, launch) {
  const { job, partitions } = groupsJob(W, streams);
  const { dir, json, dumpDir, run } = prepareJob(W, job, { dump: true, extraArgs: ["--backend", backend], ...(launch && { launch }) });
  try {
    const ranks = [await run()].flat();
    ranks.forEach((p, r) => assert.equal(p.code, 0, `rank ${r} exited ${p.code}: ${p.stderr}`));
    const rows = JSON.parse(readFileSync(json, "utf8")).results;
    assert.deepEqual(rows.map((r) => r.stage), job.stages.map((s) => s.id), "a row per stage");
    for (const stream of streams) assert.ok(rows.some((r) => (r.stream ?? "main") === stream), `no row on stream ${stream}`);
    for (const row of rows) {
      assert.equal(row.wrong, 0, `${row.stage}: the runner's check found ${row.wrong} wrong`);
      assert.equal(row.groups, partitions[row.group].length, `${row.stage}: groups`);
    }
    const compared = verifyDumps(job, W, dumpDir, partitions);
    assert.ok(compared > 1000 * W, `compared only ${compared} elements`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// Each run costs seconds of process start-up on a loaded 2-core machine: the ends, an odd size and tcp.
for (const [W, streams, backend] of [
  [2, ["main", "s1"], "shm"], [3, ["main", "s1", "s2"], "shm"], [4, ["main", "s1", "s2"], "tcp"], [8, ["main", "s1", "s2"], "shm"],
]) {
  test(`every op in block/stride/explicit/host/across groups, in place and not, W=${W}, ${streams.length} streams, ${backend}: element by element`, () =>
    checkGroups(W, streams, backend));
}

mpiTest("every op in groups, in place and not, W=3, 3 streams, under mpirun (backend mpi): element by element", () =>
  checkGroups(3, ["main", "s1", "s2"], "mpi", mpirun));

test("every op in groups, in place and not, W=3, backend nccl (ncclCommSplit of the ABI double): element by element", () =>
  checkGroups(3, ["main"], "nccl", ncclDouble));

// Each stream on a communicator of its own, its groups split from it.
test("every op in groups, in place and not, W=2, 2 streams, backend nccl (a communicator per lane, ABI double): element by element", () =>
  checkGroups(2, ["main", "s1"], "nccl", ncclDouble));

test("bad graphs stop with one line and exit 2 before any rank communicates", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-streams-"));
  const write = (name, job) => {
    const file = path.join(dir, `${name}.json`);
    writeFileSync(file, JSON.stringify({ name, tensors: { a: { dtype: "float32", count: 8 } }, ...job }));
    return file;
  };
  const cases = [
    [write("unknown-group", { stages: [{ id: "x", op: "allreduce", input: "a", group: "tp" }] }),
      'stages[0].group: unknown group "tp" (the job declares no groups)'],
    [write("not-a-partition", { groups: { g: { ranks: [[0, 1], [1, 2]] } }, stages: [{ id: "x", op: "barrier" }] }),
      "groups.g: not a partition of the ranks: rank 1 is in group 0 and again in group 1"],
    [write("root-outside", { groups: { p: { block: 2 } }, stages: [{ id: "x", op: "reduce", input: "a", group: "p", root: 3 }] }),
      'stages[0].root: root 3 is outside the groups of "p" (2 groups of 2 ranks) (expected 0..1)'],
    [write("cycle", { stages: [{ id: "x", op: "barrier", stream: "s", after: ["y"] }, { id: "y", op: "barrier", after: ["x"] }] }),
      "stages[0].after: cycle x -> y -> x (across streams s, main)"],
    [write("hccl-stream", { stages: [{ id: "x", op: "barrier" }, { id: "y", op: "allreduce", input: "a", stream: "s" }] }),
      'stages[1].stream: stage "y": backend hccl runs one lane, so no stream but "main" (igather aside)', ["--backend", "hccl"]],
    [write("hccl-group", { groups: { p: { block: 2 } }, stages: [{ id: "x", op: "allreduce", input: "a", group: "p" }] }),
      'stages[0].group: stage "x": backend hccl makes no sub-communicators, so no groups', ["--backend", "hccl"]],
  ];
  try {
    for (const [file, message, extra = []] of cases) {
      const v = await runNode([RUNNER, "validate", "-n", "4", file, ...extra]);
      assert.equal(v.code, 2, v.stderr);
      assert.equal(v.stderr.trim(), `runner: ${file}: ${message}`);
    }
    // Launched, every rank stops before meeting the others (nobody listens at the rendezvous port).
    const [file, message] = cases[0];
    const ranks = await runRanks(4, [file, "--out", path.join(dir, "runs"), "--quiet"], { timeoutMs: 30_000 });
    ranks.forEach((p, r) => {
      assert.equal(p.code, 2, p.stderr);
      assert.equal(p.stderr.trim(), `runner (rank ${r}): ${file}: ${message}`);
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

const netnsMissing = netnsUnavailable();
test("split host / split across from the topology of 2 namespace hosts × 2 ranks (shm within, tcp between): element by element; unequal hosts refused", {
  skip: netnsMissing && !process.env.CI ? netnsMissing : false,
}, async () => {
  if (netnsMissing) assert.fail(`CI must run the namespace test: ${netnsMissing}`);
  const groups = { tp: { split: "host" }, dp: { split: "across" } };
  const tensors = { g: { dtype: "int32", count: 1003, fill: { kind: "integers", seed: 9, low: -9, high: 9 } } };
  const stages = [
    { id: "tp_ar", op: "allreduce", input: "g", group: "tp", stream: "tp" },
    { id: "dp_ar", op: "allreduce", input: "g", group: "dp", stream: "dp" },
    { id: "tp_ag", op: "all_gather", input: "g", group: "tp", inPlace: true },
    { id: "dp_rs", op: "reduce_scatter", input: "g", group: "dp", stream: "dp" },
  ];
  const job = { name: "hosts", iterations: 1, warmup: 0, check: true, groups, tensors, stages };
  await withHosts(2, async (hosts) => {
    const { dir, json, dumpDir, run } = prepareJob(4, job, { dump: true, launch: (_, args) => runSpread(hosts, [0, 0, 1, 1], args) });
    try {
      const ranks = await run();
      ranks.forEach((p, r) => assert.equal(p.code, 0, `rank ${r} exited ${p.code}: ${p.stderr}`));
      const doc = JSON.parse(readFileSync(json, "utf8"));
      assert.equal(doc.backend, "shm+tcp");
      for (const row of doc.results) assert.equal(row.wrong, 0, `${row.stage}: ${row.wrong} wrong`);
      assert.ok(verifyDumps(job, 4, dumpDir, { tp: [[0, 1], [2, 3]], dp: [[0, 2], [1, 3]] }) > 4000);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    // Three ranks on one host and one on the other: the ranks meet, find the hosts, and stop before the job's
    // first collective (the launcher's local sizes alone could not tell).
    const uneven = prepareJob(4, job, { launch: (_, args) => runSpread(hosts, [0, 0, 0, 1], args) });
    try {
      const ranks = await uneven.run();
      ranks.forEach((p, r) => {
        assert.equal(p.code, 2, `rank ${r}: ${p.stderr}`);
        assert.match(p.stderr, /stages\[0\]\.group: group "tp" has groups of 3, 1 ranks: allreduce needs groups of one size/);
      });
    } finally {
      rmSync(uneven.dir, { recursive: true, force: true });
    }
  });
});
