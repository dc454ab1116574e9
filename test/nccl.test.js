// The nccl backend through the native binding, against the host-memory NCCL ABI double
// (test/doubles/nccl, built beside the addon and named in NCCL_LIBRARY): the stage matrix at 2 and 4
// ranks checked element by element; `runner info`; `backend: "auto"` on device cuda; a failing
// ncclCommInitRank, an asynchronous error, a deadline and a split that never returns each ending the job
// with an error that names NCCL; a library without the optional ncclCommGetAsyncError still running the
// matrix.
import assert from "node:assert/strict";
import { existsSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { planStart } from "../dist/comm/open.js";
import { discoverPlace } from "../dist/env/discover.js";
import { assertAsyncError, assertInitDeadline } from "./helpers/library.js";
import { prepareJob, smallJob, verifyDumps } from "./helpers/matrix.js";
import { REPO, RUNNER, runNode, runRanks } from "./helpers/ranks.js";

const DOUBLES = path.join(REPO, "native/build/doubles");
const FULL = path.join(DOUBLES, "libspmd_nccl_double_full.so");
const MINIMAL = path.join(DOUBLES, "libspmd_nccl_double_minimal.so");

test("the ABI doubles are built beside the addon", () => {
  assert.ok(existsSync(FULL), `${FULL} missing (npm run build:native builds it)`);
  assert.ok(existsSync(MINIMAL), `${MINIMAL} missing`);
});

/** The matrix with --backend nccl: every stage, dtype and reduction, checked from the dumps. */
async function matrix(W, library) {
  const job = smallJob(W, { auto: true });
  const launch = (world, args) => runRanks(world, args, { env: { NCCL_LIBRARY: library } });
  const { dir, json, dumpDir, run } = prepareJob(W, job, { dump: true, launch, extraArgs: ["--backend", "nccl"] });
  try {
    const ranks = await run();
    ranks.forEach((p, r) => assert.equal(p.code, 0, `rank ${r} exited ${p.code}: ${p.stderr}`));
    const doc = JSON.parse(readFileSync(json, "utf8"));
    assert.equal(doc.world_size, W);
    for (const row of doc.results) if (row.type) assert.equal(row.wrong, 0, `${row.stage}: runner's check found ${row.wrong} wrong`);
    const auto = doc.results.find((row) => row.stage === "f32_1003.allreduce.auto");
    assert.equal(auto.algorithm, "nccl", "auto runs NCCL's own allreduce");
    assert.ok(verifyDumps(job, W, dumpDir) > 1000 * W);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

for (const W of [2, 4]) {
  test(`every stage over the NCCL double, W=${W}: exact element by element`, () => matrix(W, FULL));
}

test("a library without ncclCommGetAsyncError and ncclGetErrorString still runs every stage (W=2)", () => matrix(2, MINIMAL));

/** A small job on 2 ranks over the double with extra environment, its allreduce in `group` if given; resolves with the ranks. */
async function small(env, { timeoutSec, args = [], group } = {}) {
  const job = {
    name: "nccl-fault",
    iterations: 1,
    warmup: 0,
    ...(timeoutSec ? { timeoutSec } : {}),
    tensors: { t: { dtype: "float32", count: 64 } },
    ...(group ? { groups: { g: group } } : {}),
    stages: [{ id: "ar", op: "allreduce", input: "t", ...(group ? { group: "g" } : {}) }],
  };
  const { dir, run } = prepareJob(2, job, {
    launch: (world, args) => runRanks(world, args, { env: { NCCL_LIBRARY: FULL, ...env } }),
    extraArgs: ["--backend", "nccl", ...args],
  });
  try {
    return await run();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("a failing ncclCommInitRank ends every rank, naming NCCL's error and text", async () => {
  // Rank 0 fails at once; the others may see it leave the store before they fail themselves.
  const ranks = await small({ SPMD_DOUBLE_FAIL_INIT: "1" });
  for (const p of ranks) assert.notEqual(p.code, 0);
  assert.match(ranks[0].stderr, /NCCL ncclCommInitRank failed: ncclSystemError \(2\): unhandled system error/);
});

test("an asynchronous NCCL error ends the op with an error naming NCCL, not a hang", async () => {
  await assertAsyncError(small, /NCCL reported an asynchronous error while waiting for ncclAllReduce of \d+ bytes: ncclRemoteError \(6\)/);
});

test("an init that never returns ends every rank at the connect deadline, naming the step", () => assertInitDeadline(small, "nccl: ncclCommInitRank"));

test("a rank that never completes: the deadline aborts the NCCL communicator", async () => {
  const started = Date.now();
  const ranks = await small({ SPMD_DOUBLE_STALL_RANK: "1" }, { timeoutSec: 1 });
  for (const p of ranks) assert.notEqual(p.code, 0);
  assert.match(ranks[1].stderr, /deadline passed while waiting for ncclAllReduce/);
  assert.ok(Date.now() - started < 60_000);
});

test("a rank stuck inside ncclCommSplit ends every rank at the op deadline, naming the split", async () => {
  const started = Date.now();
  const ranks = await small({ SPMD_DOUBLE_STALL_SPLIT_RANK: "1" }, { timeoutSec: 2, group: { block: 2 } });
  for (const p of ranks) {
    assert.equal(p.code, 1, p.stderr);
    assert.match(p.stderr, /stage ar: deadline passed while waiting for ncclCommSplit, which every rank had reached: a rank stopped or wedged inside it holds it up \(NCCL names none\)/);
  }
  assert.ok(Date.now() - started < 20_000, "ended at the op deadline, not the double's 30 s");
});

test("runner info: nccl loadable through NCCL_LIBRARY, not loadable with the reason otherwise", async () => {
  const ok = await runNode([RUNNER, "info"], { NCCL_LIBRARY: MINIMAL });
  assert.match(ok.stdout, /nccl=built/);
  assert.match(ok.stdout, /nccl: loadable \(.*libspmd_nccl_double_minimal\.so from NCCL_LIBRARY; without ncclCommGetAsyncError, ncclGetErrorString, ncclCommSplit\)/);
  const missing = await runNode([RUNNER, "info"], { NCCL_LIBRARY: "/nonexistent/libnccl.so.2" });
  assert.match(missing.stdout, /nccl: not loadable: nccl: cannot load \/nonexistent\/libnccl\.so\.2: /);
  const notNccl = await runNode([RUNNER, "info"], { NCCL_LIBRARY: "libm.so.6" });
  assert.match(notNccl.stdout, /nccl: not loadable: nccl: libm\.so\.6 lacks ncclGetUniqueId/);
});

test("backend rules: auto picks nccl on device cuda; a device with another backend is refused", () => {
  const env = { RANK: "0", WORLD_SIZE: "2", LOCAL_RANK: "0", LOCAL_WORLD_SIZE: "2", MASTER_ADDR: "127.0.0.1", MASTER_PORT: "29500" };
  const place = discoverPlace(env);
  const plan = (requested, device) => {
    try {
      return planStart({ requested, place, env, built: ["shm", "nccl"], master: place.master, device });
    } catch (err) {
      return err.message;
    }
  };
  assert.deepEqual(plan("auto", "cuda"), { backend: "nccl", bootstrap: "tcp" });
  assert.deepEqual(plan("nccl", "cpu"), { backend: "nccl", bootstrap: "tcp" });
  // Host memory: "auto" stays open until the ranks have compared hosts (shm, tcp or the shm+tcp hybrid).
  assert.deepEqual(plan("auto", "cpu"), { backend: "auto", bootstrap: "tcp" });
  assert.match(plan("shm", "cuda"), /device cuda: backend shm cannot run there; use backend nccl/);
  assert.match(plan("nccl", "npu"), /device npu: backend nccl cannot run there; use backend hccl/);
  assert.match(plan("auto", "npu"), /backend hccl is not available in this build/);
  const alone = discoverPlace({});
  assert.deepEqual(planStart({ requested: "nccl", place: alone, env: {}, built: ["shm", "nccl"], master: {} }), { backend: "nccl", bootstrap: "none" });
});

test("the binding alone, one rank: unique id, connect, an allreduce; errors carry ERR_SPMD_NCCL / ERR_SPMD_UNSUPPORTED", async () => {
  const { native } = await import("../dist/comm/native.js");
  const addon = native();
  assert.ok(addon.backends.includes("nccl"));
  const id = addon.libraryId("nccl", FULL);
  assert.equal(id.length, 128);
  const comm = new addon.Communicator({ backend: "nccl", rank: 0, size: 1, localRank: 0, library: FULL, id });
  try {
    await comm.connect();
    assert.equal(comm.backend, "nccl");
    assert.deepEqual([...(await comm.allreduceF64(new Float64Array([1.5, -2]), "max", 30, "binding test"))], [1.5, -2]);
  } finally {
    comm.close();
  }
  assert.throws(() => addon.libraryId("nccl", "/nonexistent/libnccl.so.2"), { code: "ERR_SPMD_UNSUPPORTED" });
  process.env.SPMD_DOUBLE_FAIL_INIT = "1";  // read by the double when ncclCommInitRank runs
  const failing = new addon.Communicator({ backend: "nccl", rank: 0, size: 1, localRank: 0, library: FULL, id: addon.libraryId("nccl", FULL) });
  try {
    await assert.rejects(failing.connect(), { code: "ERR_SPMD_NCCL", message: /ncclCommInitRank failed: ncclSystemError \(2\)/ });
  } finally {
    delete process.env.SPMD_DOUBLE_FAIL_INIT;
    failing.close();
  }
});
