// What a run records to explain itself: p99 and standard deviation, --samples (every iteration, slowest
// rank's and each rank's), the manifest (versions, build, environment, hosts), and the wrong elements the
// check located, found through a fault only the NCCL ABI double can inject (SPMD_DOUBLE_CORRUPT_RECV); and
// on 2 namespace hosts x 2 ranks (shm+tcp), the bytes and time of each stage over shm and over tcp.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { timeStats } from "../dist/metrics/stats.js";
import { netnsUnavailable, runSpread, withHosts } from "./helpers/netns.js";
import { REPO, runRanks } from "./helpers/ranks.js";
import { requiredTest } from "./helpers/required.js";

const DOUBLE = path.join(REPO, "native/build/doubles/libspmd_nccl_double_full.so");

test("timeStats: p99 by nearest rank and the sample standard deviation", () => {
  const values = Array.from({ length: 200 }, (_, i) => i + 1); // 1..200
  const t = timeStats(values);
  assert.equal(t.p50_us, 100);
  assert.equal(t.p95_us, 190);
  assert.equal(t.p99_us, 198);
  assert.ok(Math.abs(t.stddev_us - Math.sqrt((200 * 201) / 12)) < 1e-9, String(t.stddev_us)); // n(n+1)/12 for 1..n
  assert.deepEqual([timeStats([5]).stddev_us, timeStats([5]).p99_us], [0, 5]);
});

/** Writes `job`, runs `start(args)` with --json into a temporary directory; returns the processes and the document. */
async function runJob(job, start, extra = []) {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-diagnose-"));
  try {
    const file = path.join(dir, "job.json"), json = path.join(dir, "out.json");
    writeFileSync(file, JSON.stringify(job));
    const ranks = await start([file, "--out", path.join(dir, "runs"), "--json", json, "--quiet", ...extra]);
    return { ranks, doc: JSON.parse(readFileSync(json, "utf8")) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const tensors = { x: { dtype: "float32", count: 1000, fill: { kind: "normal", seed: 3 } } };

test("--samples and the manifest: 3 ranks keep every iteration; NCCL_/UCX_/OMPI_MCA_ variables and the hosts are recorded", async () => {
  const job = { name: "samples", iterations: 6, warmup: 1, check: true, tensors, stages: [{ id: "ar", op: "allreduce", input: "x" }] };
  const env = { NCCL_ALGO: "ring", UCX_TLS: "tcp", OMPI_MCA_btl: "self", SPMD_RUNNER_TOKEN: "secret-token", UNRELATED_VAR: "x" };
  const { ranks, doc } = await runJob(job, (args) => runRanks(3, ["run", ...args], { env }), ["--samples"]);
  ranks.forEach((p, r) => assert.equal(p.code, 0, `rank ${r}: ${p.stderr}`));
  const [row] = doc.results;
  const { slowest_us: slowest, per_rank_us: perRank } = row.samples;
  assert.equal(slowest.length, 6);
  assert.equal(perRank.length, 3);
  perRank.forEach((times) => assert.equal(times.length, 6));
  // An iteration's time is its slowest rank's, and the statistics are over those.
  slowest.forEach((t, k) => assert.equal(t, Math.max(...perRank.map((times) => times[k]))));
  assert.deepEqual(row.time, timeStats(slowest));
  assert.ok(row.time.stddev_us > 0 && row.time.p99_us === Math.max(...slowest));

  const m = doc.manifest;
  assert.equal(m.node, process.version);
  assert.match(m.git, /^[0-9a-f]{40}(-dirty)?$/, "run from a checkout");
  assert.equal(m.runner, doc.version);
  assert.deepEqual(Object.keys(m.addon), ["mpi", "cuda"]);
  assert.equal(m.library, null, "shm links the ranks itself");
  // The user's variables, and the UCX settings the runner defaults before loading the addon (src/comm/native.ts).
  assert.deepEqual(m.env, {
    NCCL_ALGO: "ring", OMPI_MCA_btl: "self", SPMD_RUNNER_TOKEN: "(set)", UCX_MEM_MALLOC_HOOKS: "no", UCX_MEM_MMAP_HOOK_MODE: "none", UCX_TLS: "tcp",
  });
  assert.equal(m.settings.iterations, 6);
  assert.deepEqual(m.hosts, [{ name: os.hostname(), cpu: os.cpus()[0].model.trim(), cores: os.availableParallelism(), gpus: m.hosts[0].gpus }]);
});

test("a corrupted receive (SPMD_DOUBLE_CORRUPT_RECV, NCCL double): the check locates the element, its source rank and both values", async () => {
  const job = {
    name: "corrupt", iterations: 2, warmup: 1, check: true, tensors,
    stages: [{ id: "sr", op: "send_recv", input: "x", shift: 1 }, { id: "ar", op: "allreduce", input: "x" }],
  };
  // Rank 1's received byte 31 is float32 element 7's sign byte; shift 1 sends rank 0's tensor to rank 1.
  const env = { NCCL_LIBRARY: DOUBLE, SPMD_DOUBLE_CORRUPT_RECV: "1:31" };
  const { ranks, doc } = await runJob(job, (args) => runRanks(3, ["run", ...args, "--backend", "nccl"], { env }));
  ranks.forEach((p, r) => assert.equal(p.code, 1, `rank ${r} exited ${p.code}: ${p.stderr}`));
  const [sr, ar] = doc.results;
  assert.equal(sr.wrong, 1);
  assert.equal(sr.mismatches.length, 1);
  const [m] = sr.mismatches;
  assert.deepEqual({ ...m, expected: undefined, found: undefined }, { rank: 1, tensor: "x", index: 7, from: 0, source_index: 7, expected: undefined, found: undefined });
  assert.ok(m.expected !== 0 && m.found === -m.expected, JSON.stringify(m));
  assert.equal(ar.wrong, 0, "NCCL's own allreduce does not go through ncclRecv");
  assert.equal(doc.manifest.library, `NCCL 2.18.5 (${DOUBLE})`, "ncclGetVersion, as the double answers it");
  assert.equal(ar.mismatches, undefined);
  assert.match(ranks[0].stderr, /1 wrong elements/);
  assert.match(ranks[0].stderr, new RegExp(`stage sr, rank 1: output element 7 \\(from x, rank 0's element 7\\) expected ${m.expected}, found ${m.found}`));
});

test("a ring allreduce's corrupted receives: the wrong elements are reductions, naming no source rank", async () => {
  // The ring moves blocks over the double's point-to-point exchanges: every block rank 1 receives has its
  // element 7 flipped, and the wrong partial sums travel on to the other ranks.
  const job = { name: "ring", iterations: 1, warmup: 0, check: true, tensors, stages: [{ id: "ar", op: "allreduce", input: "x", algorithm: "ring" }] };
  const env = { NCCL_LIBRARY: DOUBLE, SPMD_DOUBLE_CORRUPT_RECV: "1:31" };
  const { ranks, doc } = await runJob(job, (args) => runRanks(3, ["run", ...args, "--backend", "nccl"], { env }));
  ranks.forEach((p, r) => assert.equal(p.code, 1, `rank ${r} exited ${p.code}: ${p.stderr}`));
  const [ar] = doc.results;
  assert.ok(ar.wrong >= 1, JSON.stringify(ar));
  assert.ok(ar.mismatches.length >= 1 && ar.mismatches.length <= 10 * 3);
  for (const m of ar.mismatches) {
    assert.equal(m.from, null);
    assert.equal(m.source_index, m.index);
    assert.notEqual(m.found, m.expected);
  }
  console.log(`# ${ar.wrong} wrong; first: ${JSON.stringify(ar.mismatches[0])}`);
});

const netnsTest = requiredTest("diagnose.test.js", netnsUnavailable());

netnsTest("shm+tcp on 2 hosts x 2 ranks: each stage's bytes over shm and over tcp, as its algorithm's peers say", async () => {
  // 1000 floats: a ring allreduce sends 2(W-1) blocks of 250 per rank, ranks 0 and 2 to their host's other
  // rank (shm), ranks 1 and 3 across (tcp); a shift of 2 sends every rank's tensor across. The hierarchical
  // allreduce sends each rank's host peer 500 floats to reduce and 500 reduced, and each rank's peer across
  // 2 blocks of 250: a third fewer bytes between the hosts than the ring.
  const job = {
    name: "links", iterations: 3, warmup: 1, check: true, tensors,
    stages: [{ id: "ring", op: "allreduce", input: "x", algorithm: "ring" }, { id: "across", op: "send_recv", input: "x", shift: 2 },
      { id: "hierarchical", op: "allreduce", input: "x", algorithm: "hierarchical" }],
  };
  await withHosts(2, async (hosts) => {
    const { ranks, doc } = await runJob(job, (args) => runSpread(hosts, [0, 0, 1, 1], ["run", ...args.filter((a) => a !== "--quiet")]));
    ranks.forEach((p, r) => assert.equal(p.code, 0, `rank ${r}: ${p.stderr}`));
    assert.equal(doc.backend, "shm+tcp");
    const [ring, across, hierarchical] = doc.results;
    assert.deepEqual([ring.links.shm.bytes, ring.links.tcp.bytes], [12000, 12000]);
    assert.deepEqual([across.links.shm.bytes, across.links.tcp.bytes], [0, 16000]);
    assert.deepEqual([hierarchical.algorithm, hierarchical.links.shm.bytes, hierarchical.links.tcp.bytes], ["hierarchical", 16000, 8000]);
    assert.ok(ring.links.shm.us > 0 && ring.links.tcp.us > 0 && across.links.tcp.us > 0);
    assert.equal(across.links.shm.us, 0);
    const line = /# Links per step {7}: shm 0\.028 MB \(all ranks\) in [\d.]+ us \([\d.]+ GB\/s\), tcp 0\.036 MB \(all ranks\) in [\d.]+ us/;
    assert.match(ranks[0].stdout, line);
    console.log(`# ${ranks[0].stdout.split("\n").find((l) => l.startsWith("# Links"))}`);
  });
});
