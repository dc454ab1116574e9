// The hccl backend through the native binding, against the host-memory HCCL ABI double
// (test/doubles/hccl, named in HCCL_LIBRARY): it shares the library layer with nccl (nccl.test.js covers
// that layer in depth), so this holds HCCL's own parts: its 4108-byte root info, its enums (the matrix
// checks every dtype and reduction), HcclBatchSendRecv, its error text, and a deadline without an abort.
import assert from "node:assert/strict";
import { existsSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { assertAsyncError, assertInitDeadline } from "./helpers/library.js";
import { prepareJob, smallJob, verifyDumps } from "./helpers/matrix.js";
import { REPO, RUNNER, runNode, runRanks } from "./helpers/ranks.js";

const DOUBLE = path.join(REPO, "native/build/doubles/libspmd_hccl_double.so");

test("the HCCL double is built beside the addon", () => assert.ok(existsSync(DOUBLE), `${DOUBLE} missing`));

// The Ascend device here has no kernels (backends/library/acl_device.cc), with the real HCCL as with the
// double, which runs on the ACL runtime's double: a stage that needs them (a mean, a float16 or bfloat16
// reduction, which the runner does in float32) is refused in one line naming it; every other stage runs.
const REDUCING = new Set(["allreduce", "reduce_scatter", "reduce"]);
const needsKernels = (job) => (stage) => REDUCING.has(stage.op) && (stage.reduce === "mean" || /^(float16|bfloat16)$/.test(job.tensors[stage.input]?.dtype));

test("every stage over the HCCL double, W=3: exact element by element; those that need NPU kernels refused", async () => {
  const W = 3;
  const all = smallJob(W, { auto: true });
  const refused = all.stages.filter(needsKernels(all));
  assert.ok(refused.length >= 2, "the matrix has means to refuse");
  const job = { ...all, stages: all.stages.filter((s) => !needsKernels(all)(s)) };
  const launch = (world, args) => runRanks(world, args, { env: { HCCL_LIBRARY: DOUBLE } });
  const { dir, json, dumpDir, run } = prepareJob(W, job, { dump: true, launch, extraArgs: ["--backend", "hccl"] });
  try {
    const ranks = await run();
    ranks.forEach((p, r) => assert.equal(p.code, 0, `rank ${r} exited ${p.code}: ${p.stderr}`));
    const doc = JSON.parse(readFileSync(json, "utf8"));
    for (const row of doc.results) if (row.type) assert.equal(row.wrong, 0, `${row.stage}: ${row.wrong} wrong`);
    assert.equal(doc.results.find((row) => row.stage === "f32_1003.reduce_scatter.auto").algorithm, "hccl");
    // HcclAlltoAllV; "direct" is one HcclBatchSendRecv.
    assert.equal(doc.results.find((row) => row.stage === "f32_1003.all_to_allv.auto").algorithm, "hccl");
    assert.equal(doc.results.find((row) => row.stage === "f32_1003.all_to_allv.direct").algorithm, "direct");
    assert.ok(verifyDumps(job, W, dumpDir) > 1000 * W);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  for (const stage of [refused.find((s) => s.reduce === "mean" && s.input === "f32_1003"), refused.find((s) => s.op === "allreduce" && all.tensors[s.input]?.dtype === "bfloat16")]) {
    const one = { ...all, stages: [stage] };
    const { dir: at, run: alone } = prepareJob(W, one, { launch, extraArgs: ["--backend", "hccl"] });
    try {
      for (const p of await alone()) {
        assert.equal(p.code, 1, p.stderr);
        assert.match(p.stderr, new RegExp(`stage ${stage.id.replaceAll(".", "\\.")}: hccl: this build has no NPU kernels`));
      }
    } finally {
      rmSync(at, { recursive: true, force: true });
    }
  }
});

async function small(env, { timeoutSec, args = [] } = {}) {
  const job = {
    name: "hccl-fault", iterations: 1, warmup: 0, ...(timeoutSec ? { timeoutSec } : {}),
    tensors: { t: { dtype: "float32", count: 64 } },
    stages: [{ id: "ar", op: "allreduce", input: "t" }],
  };
  const { dir, run } = prepareJob(2, job, {
    launch: (world, args) => runRanks(world, args, { env: { HCCL_LIBRARY: DOUBLE, ...env } }),
    extraArgs: ["--backend", "hccl", ...args],
  });
  try {
    return await run();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("HCCL errors: a failing HcclCommInitRootInfo, an asynchronous error, a deadline", async () => {
  // Rank 0 fails at once; the others may see it leave the store before they fail themselves.
  const failed = await small({ SPMD_DOUBLE_FAIL_INIT: "1" });
  for (const p of failed) assert.notEqual(p.code, 0);
  assert.match(failed[0].stderr, /HCCL HcclCommInitRootInfo failed: HCCL_E_INTERNAL \(4\): internal error/);
  await assertAsyncError(small, /HCCL reported an asynchronous error while waiting for HcclAllReduce of \d+ bytes: HCCL_E_REMOTE \(21\)/);
  const stalled = await small({ SPMD_DOUBLE_STALL_RANK: "1" }, { timeoutSec: 1 });
  for (const p of stalled) assert.notEqual(p.code, 0);
  assert.match(stalled[1].stderr, /deadline passed while waiting for HcclAllReduce/);
});

test("an init that never returns ends every rank at the connect deadline, naming the step", () => assertInitDeadline(small, "hccl: HcclCommInitRootInfo"));

test("the binding: root info of 4108 bytes; runner info reports hccl", async () => {
  const { native } = await import("../dist/comm/native.js");
  assert.equal(native().libraryId("hccl", DOUBLE).length, 4108);
  assert.throws(() => native().libraryId("hccl", "/nonexistent/libhccl.so"), { code: "ERR_SPMD_UNSUPPORTED" });
  const info = await runNode([RUNNER, "info"], { HCCL_LIBRARY: DOUBLE });
  assert.match(info.stdout, /hccl=built/);
  assert.match(info.stdout, /hccl: loadable \(.*libspmd_hccl_double\.so from HCCL_LIBRARY\)/);
  const none = await runNode([RUNNER, "info"], { HCCL_LIBRARY: "/nonexistent/libhccl.so" });
  assert.match(none.stdout, /hccl: not loadable: hccl: cannot load \/nonexistent\/libhccl\.so/);
});
