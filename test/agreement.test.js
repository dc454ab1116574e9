// Start-up agreement: ranks that run different jobs, flags or runner versions all stop before the first
// op, with one line naming the rank that differs and where; rank 0's fingerprint is the reference.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { describeDifference, firstDifference } from "../dist/comm/agreement.js";
import { mpmd, mpiTest } from "./helpers/mpi.js";
import { REPO, RUNNER, freePort, rankEnv, runNode, shmLeftovers } from "./helpers/ranks.js";

const QUICKSTART = JSON.parse(readFileSync(path.join(REPO, "jobs/quickstart.json"), "utf8"));
const T = { timeout: 60_000 };

const fp = (job, run = { backend: "auto", connectTimeoutSec: 60 }, version = "1.0.0") => ({ version, job, run });

test("describeDifference names the rank, the part and the first differing path", () => {
  const job = { name: "j", iterations: 20, stages: [{ id: "a", op: "allreduce", reduce: "sum" }, { id: "b", op: "allreduce", reduce: "sum" }] };
  const mean = structuredClone(job);
  mean.stages[1].reduce = "mean";
  assert.equal(describeDifference(2, fp(mean), fp(job)), `rank 2's job differs from rank 0's: stages[1].reduce is "mean" vs "sum"`);
  assert.equal(describeDifference(1, fp({ ...job, iterations: 7 }), fp(job)), "rank 1's job differs from rank 0's: iterations is 7 vs 20");
  assert.equal(describeDifference(1, fp({ ...job, stages: job.stages.slice(0, 1) }), fp(job)), "rank 1's job differs from rank 0's: stages[1] is missing vs an object");
  assert.equal(describeDifference(3, fp(job, { backend: "shm", connectTimeoutSec: 60 }), fp(job)), `rank 3's run configuration differs from rank 0's: backend is "shm" vs "auto"`);
  assert.equal(describeDifference(1, fp(job, undefined, "1.0.1"), fp(job)), `rank 1's runner version differs from rank 0's: "1.0.1" vs "1.0.0"`);
  assert.equal(describeDifference(1, fp(structuredClone(job)), fp(job)), "");
  assert.equal(firstDifference({ a: 1, b: [1, { c: null }] }, { b: [1, { c: null }], a: 1 }), undefined, "key order does not matter");
});

test("ranks running different jobs under one name stop together, naming the rank and the field (tcp rendezvous, shm)", T, async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-agree-"));
  try {
    const same = path.join(dir, "a.json"), other = path.join(dir, "b.json");
    writeFileSync(same, JSON.stringify(QUICKSTART));
    const changed = structuredClone(QUICKSTART);
    changed.stages[1].reduce = "sum";
    writeFileSync(other, JSON.stringify(changed));
    const W = 3, port = await freePort();
    const files = [same, same, other];
    const ranks = await Promise.all(files.map((job, r) => runNode([RUNNER, job, "--out", dir], rankEnv(r, W, port), 30_000)));
    for (const [r, p] of ranks.entries()) {
      assert.equal(p.code, 2, `rank ${r}: ${p.stderr}`);
      assert.match(p.stderr, new RegExp(`runner \\(rank ${r}\\): start-up: rank 2's job differs from rank 0's: stages\\[1\\]\\.reduce is "sum" vs "mean"; every rank must run the same job`), p.stderr);
      assert.doesNotMatch(p.stderr, /running \d+ stages/, "no rank ran the job");
    }
    assert.deepEqual(shmLeftovers(ranks.map((p) => p.pid)), []);
    // A flag counts as part of the job: here rank 1 alone asks for other iterations.
    const port2 = await freePort();
    const flags = await Promise.all([0, 1].map((r) => runNode([RUNNER, same, "--out", dir, ...(r ? ["--iterations", "7"] : [])], rankEnv(r, 2, port2), 30_000)));
    for (const p of flags) assert.match(p.stderr, /start-up: rank 1's job differs from rank 0's: iterations is 7 vs 20/, p.stderr);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

mpiTest("under mpirun (MPMD: one rank runs another job file), every rank stops with the difference", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-agree-"));
  try {
    const same = path.join(dir, "a.json"), other = path.join(dir, "b.json");
    writeFileSync(same, JSON.stringify(QUICKSTART));
    writeFileSync(other, JSON.stringify({ ...QUICKSTART, warmup: 1 }));
    const p = await mpmd([{ np: 2, args: [same, "--out", dir] }, { np: 1, args: [other, "--out", dir] }], { timeoutMs: 60_000 });
    assert.notEqual(p.code, 0);
    const lines = p.stderr.match(/runner \(rank \d\): start-up: rank 2's job differs from rank 0's: warmup is 1 vs 5;.*/g) ?? [];
    assert.equal(lines.length, 3, p.stderr);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
