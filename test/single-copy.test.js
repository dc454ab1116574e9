// The shm backend's single-copy path (native/src/backends/shm/single_copy.h): every op it serves checked
// element by element against the reference in helpers/matrix.js on both paths (single copy, the default
// here, and the staged path SPMD_SHM_SINGLE_COPY=0 forces), at odd world sizes, lengths not divisible by W,
// zero length and all_to_allv with uneven and zero counts; the ranks' agreement (one rank told to stage
// stages them all); and a real refusal: a rank of another user may not read root's ranks (EPERM), so all stage.
// The 2.25 GiB case is in large.test.js (its lane beside the rest keeps the memory of the two apart).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import os from "node:os";
import { test } from "node:test";
import { native } from "../dist/comm/native.js";
import { formatSize } from "../dist/config/size.js";
import { prepareJob, verifyDumps, vCounts } from "./helpers/matrix.js";
import { freePort, rankEnv, RUNNER, runNode, runRanks, spawnRunner } from "./helpers/ranks.js";

// The ranks time from which size blocks move single-copy (at most singleCopyFromBytes per pair, broadcast at
// most singleCopyBroadcastFromBytes): N float32 elements give blocks of that and more at W=5 (all_to_all's,
// and the largest all_to_allv's), not a multiple of W, and a broadcast of more.
const { singleCopyFromBytes, singleCopyBroadcastFromBytes, singleCopyReduceTimedBytes, singleCopyTimedBytes } = native();
const FROM = singleCopyFromBytes / 4;
const N = 5 * FROM + 3;
// Where this host refuses CMA (Yama, seccomp) the single-copy cases cannot run; the staged ones still do.
const REFUSED = native().singleCopyRefusal();
const needsCma = { skip: REFUSED ? `this host refuses CMA: ${REFUSED}` : false };

function job(W) {
  const fill = (seed) => ({ kind: "integers", seed, low: -9, high: 9 });
  const tensors = { x: { dtype: "float32", count: N, fill: fill(3) }, z: { dtype: "float32", count: 0, fill: fill(4) } };
  const stages = [];
  for (const t of ["x", "z"]) {
    const n = tensors[t].count;
    stages.push(
      { id: `${t}.all_to_all`, op: "all_to_all", input: t },
      { id: `${t}.all_to_allv`, op: "all_to_allv", input: t, counts: vCounts(n, W) },
      { id: `${t}.gather`, op: "gather", input: t, root: W - 1 },
      { id: `${t}.scatter`, op: "scatter", input: t, root: 1 },
      { id: `${t}.all_gather`, op: "all_gather", input: t },
      { id: `${t}.broadcast`, op: "broadcast", input: t, root: W - 1 },
      // Pulled from the peer at W=2 where the start-up timed that faster (cores that share no cache), else staged.
      { id: `${t}.allreduce`, op: "allreduce", input: t },
      { id: `${t}.reduce_scatter`, op: "reduce_scatter", input: t },
    );
  }
  return { name: `single-copy-${W}`, iterations: 2, warmup: 1, check: true, tensors, stages };
}

// In place (the runner's check): all_to_all's buffers overlap as single copy cannot take, so the ranks see
// it in the handshake and stage that op; all_gather stays single-copy at W=2.
function inPlaceJob(W) {
  const tensors = { y: { dtype: "float32", count: W * (FROM + 1), fill: { kind: "integers", seed: 5, low: -9, high: 9 } } };
  const stages = ["all_to_all", "all_gather", "broadcast"].map((op) => ({ id: `y.${op}`, op, input: "y", inPlace: true, ...(op === "broadcast" && { root: 0 }) }));
  return { name: `single-copy-in-place-${W}`, iterations: 2, warmup: 1, check: true, tensors, stages };
}

const UNITS = { KiB: 1024, MiB: 1024 ** 2 };
const bytesOf = (text) => Number(text.split(" ")[0]) * UNITS[text.split(" ")[1]];

/**
 * `paths`, the copy path of results.json and of each rank's log: one text on every rank, single copy from one
 * of the timed sizes or the default above them, broadcast too at W=2 (only there it moves single-copy),
 * timed where each rank has a CPU of the machine's.
 */
function assertSingleCopy(paths, W) {
  assert.equal(new Set(paths).size, 1, `the ranks disagree: ${paths.join(" | ")}`);
  const m = paths[0].match(/^single-copy: cma \(process_vm_readv\/writev\) from (\d+ [KM]iB)(?:, broadcast from (\d+ [KM]iB))?(?:, reductions pulled from (\d+ [KM]iB))? \((timed|not timed)\b[^)]*\)$/);
  assert.ok(m, paths[0]);
  assert.ok([...singleCopyTimedBytes, singleCopyFromBytes].includes(bytesOf(m[1])), paths[0]);
  if (W === 2) assert.ok([...singleCopyTimedBytes, singleCopyBroadcastFromBytes].includes(bytesOf(m[2])), paths[0]);
  else assert.equal(m[2], undefined, paths[0]);
  if (m[3] !== undefined) assert.ok(W === 2 && singleCopyReduceTimedBytes.includes(bytesOf(m[3])), paths[0]);
  assert.equal(m[4], W <= os.cpus().length ? "timed" : "not timed", paths[0]);
}

// Every rank logs its backend at debug level: "backend shm on <host> (ranks 0,1), <copy path>, bootstrap tcp".
const LOGGED = /backend shm on .*?, ((?:single-copy:|staged) .*), bootstrap \S+$/m;

async function run(W, theJob, { env = {}, dump = false } = {}) {
  const logged = ["--log-level", "debug", "--log-all-ranks"];
  const { dir, json, dumpDir, run: go } = prepareJob(W, theJob, { dump, extraArgs: logged, launch: (w, args) => runRanks(w, args, { env }) });
  try {
    const ranks = await go();
    ranks.forEach((p, r) => assert.equal(p.code, 0, `rank ${r} exited ${p.code}: ${p.stderr}`));
    const doc = JSON.parse(readFileSync(json, "utf8"));
    assert.equal(doc.results.length, theJob.stages.length);
    for (const row of doc.results) assert.equal(row.wrong, 0, `${row.stage}: runner's check found ${row.wrong} wrong`);
    if (dump) assert.ok(verifyDumps(theJob, W, dumpDir) > N * W, "compared too few elements");
    const paths = ranks.map((p, r) => (p.stderr + p.stdout).match(LOGGED)?.[1] ?? assert.fail(`rank ${r} logged no copy path: ${p.stderr}`));
    return { ...doc, paths: [doc.copy_path, ...paths] };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// W=2: all_gather and broadcast move single-copy only there.
for (const W of [2, 3, 5]) {
  for (const [path, env] of [["single copy", {}], ["staged", { SPMD_SHM_SINGLE_COPY: "0" }]]) {
    test(`${path}, W=${W}: all_to_all(v), gather, scatter, all_gather, broadcast of ${N} and 0 elements, every element`, path === "staged" ? {} : needsCma, async () => {
      assert.ok(Math.max(...vCounts(N, W).flat()) * 4 >= native().singleCopyFromBytes, "all_to_allv's largest block would stage");
      const doc = await run(W, job(W), { env, dump: true });
      if (path === "staged") assert.deepEqual(new Set(doc.paths), new Set(["staged (rank 0: SPMD_SHM_SINGLE_COPY=0)"]));
      else assertSingleCopy(doc.paths, W);
      const scatter = doc.results.find((r) => r.stage === "x.scatter").algorithm;  // shared only where it moves single-copy
      if (path === "staged") assert.notEqual(scatter, "shared");
      else assert.equal(scatter, "shared");
    });
  }
  test(`single copy, W=${W}: in place (all_to_all stages${W === 2 ? ", all_gather moves single-copy" : ""})`, needsCma, async () => {
    assertSingleCopy((await run(W, inPlaceJob(W))).paths, W);
  });
}

test("one rank told to stage (SPMD_SHM_SINGLE_COPY=0) stages every rank, with results exact", needsCma, async () => {
  const doc = await run(3, job(3), { env: (r) => (r === 2 ? { SPMD_SHM_SINGLE_COPY: "0" } : {}) });
  assert.equal(doc.copy_path, "staged (rank 2: SPMD_SHM_SINGLE_COPY=0)");
});

test("one rank told to keep the paths fixed (SPMD_SHM_SINGLE_COPY=fixed) leaves every rank untimed on the defaults, with results exact", needsCma, async () => {
  const doc = await run(2, job(2), { env: (r) => (r === 1 ? { SPMD_SHM_SINGLE_COPY: "fixed" } : {}) });
  const fixed = `single-copy: cma (process_vm_readv/writev) from ${formatSize(native().singleCopyFromBytes)}, broadcast from ${formatSize(native().singleCopyBroadcastFromBytes)} (not timed: SPMD_SHM_SINGLE_COPY=fixed)`;
  assert.deepEqual(new Set(doc.paths), new Set([fixed]));
});

test("runner info says which path shm ranks take here, and that SPMD_SHM_SINGLE_COPY=0 stages and fixed leaves untimed", async () => {
  const line = (out) => out.split("\n").find((l) => l.startsWith("shm "));
  const here = REFUSED ? `shm staged (${REFUSED})` : "shm single-copy: cma (process_vm_readv/writev) from 16 KiB to 256 KiB or 1 MiB, as the ranks time it at start-up";
  assert.equal(line((await runNode([RUNNER, "info"])).stdout), here);
  assert.equal(line((await runNode([RUNNER, "info"], { SPMD_SHM_SINGLE_COPY: "0" })).stdout), "shm staged (SPMD_SHM_SINGLE_COPY=0)");
  if (!REFUSED) assert.equal(line((await runNode([RUNNER, "info"], { SPMD_SHM_SINGLE_COPY: "fixed" })).stdout), "shm single-copy: cma (process_vm_readv/writev) from 1 MiB, untimed (SPMD_SHM_SINGLE_COPY=fixed)");
});

test("SPMD_SHM_SINGLE_COPY other than 0, 1 or fixed: one line naming it, no stack", async () => {
  const { dir, run: go } = prepareJob(2, job(2), { launch: (w, args) => runRanks(w, args, { env: { SPMD_SHM_SINGLE_COPY: "yes" } }) });
  try {
    for (const p of await go()) {
      assert.notEqual(p.code, 0);
      assert.match(p.stderr, /SPMD_SHM_SINGLE_COPY=yes is not 0, 1 or fixed/);
      assert.doesNotMatch(p.stderr, /\n\s+at /);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// A real refusal, not the knob: rank 0's process_vm_readv fails with EPERM, as it does where the kernel does
// not let one process read another (another user, no CAP_SYS_PTRACE). The kernel's own failure, injected
// into that one syscall by strace: ranks of different users can no longer share a job's segment at all
// (shm checks that its owner is the attaching rank's own user, #43).
const STRACE = spawnSync("strace", ["-V"]).error ? "strace not found (apt-get install strace)" : undefined;
test("a rank that may not read its peers' memory (EPERM) makes every rank stage, with results exact", { skip: needsCma.skip || (!process.env.CI && STRACE) }, async () => {
  assert.equal(STRACE, undefined, STRACE);
  const W = 3;
  const refuse = ["strace", "-f", "-qq", "--seccomp-bpf", "-o", "/dev/null", "-e", "trace=process_vm_readv", "-e", "inject=process_vm_readv:error=EPERM"];
  const { dir, json, run: go } = prepareJob(W, job(W), {
    launch: async (w, args) => {
      const port = await freePort();
      const ranks = Array.from({ length: w }, (_, r) => spawnRunner(args, rankEnv(r, w, port), { wrap: r === 0 ? refuse : [] }));
      return Promise.all(ranks.map((r) => r.exited));
    },
  });
  try {
    const ranks = await go();
    ranks.forEach((p, r) => assert.equal(p.code, 0, `rank ${r} exited ${p.code}: ${p.stderr}`));
    const doc = JSON.parse(readFileSync(json, "utf8"));
    assert.match(doc.copy_path, /^staged \(rank 0: process_vm_readv from rank [12]: Operation not permitted\)$/);
    for (const row of doc.results) assert.equal(row.wrong, 0, `${row.stage}: ${row.wrong} wrong`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
