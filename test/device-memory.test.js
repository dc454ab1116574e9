// Tensors in device memory on the library backends, against the host-memory ABI doubles (test/doubles): the
// NCCL double runs on doubles of the CUDA runtime and driver, which load the addon's embedded fatbins and run
// each kernel cuda_kernels.cc launches as the CPU kernels it matches bit for bit
// (native/tests/cuda_kernels_test.cc holds them to that on a GPU); the HCCL double on a double of the ACL
// runtime, which has no kernels, as an Ascend device has none in this build. On `device: "cuda"`, the 1-bit
// and quantized allreduces (sub-communicators through ncclCommSplit), the exact stages that need kernels
// (mean, float16/bfloat16) and the exchanges the device lane runs itself give byte for byte the dumps that
// shm gives: inputs, outputs, error-feedback state, and so the same rel_error; on `"npu"` the stages that
// need no kernels do, and the others are refused naming the stage. (Exact float reductions add in each
// backend's own order: the runner's check holds those to its rounding bound, and rel_error, measured against
// such sums, to 1e-12.) A build without nvcc embeds no kernels: there the cuda stages that need them are
// refused, saying so.
import assert from "node:assert/strict";
import { readdirSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { prepareJob } from "./helpers/matrix.js";
import { REPO, RUNNER, runNode, runRanks } from "./helpers/ranks.js";

const DOUBLES = path.join(REPO, "native/build/doubles");
const NCCL = path.join(DOUBLES, "libspmd_nccl_double_full.so");
const NCCL_MINIMAL = path.join(DOUBLES, "libspmd_nccl_double_minimal.so");
const HCCL = path.join(DOUBLES, "libspmd_hccl_double.so");

const W = 4;

function estimatingJob({ quantized = true } = {}) {
  const tensors = {
    g: { dtype: "float32", count: 6000, fill: { kind: "normal", seed: 7 } },
    h: { dtype: "bfloat16", count: 4000, fill: { kind: "normal", seed: 3, std: 2 } },
    d: { dtype: "float64", count: 1001, fill: { kind: "normal", seed: 5 } },
    i: { dtype: "float16", count: 1003, fill: { kind: "integers", seed: 9, low: -4, high: 4 } },
  };
  const stages = [
    { id: "onebit", op: "compressed_allreduce", input: "g" },
    { id: "onebit_bf16", op: "compressed_allreduce", input: "h", resetEvery: 2 },
    { id: "onebit_f64", op: "compressed_allreduce", input: "d" },
    // Exact stages whose device path needs kernels (the mean's division, float16 widened to float32) or
    // runs its own exchanges (all_to_all, gather, scatter, send_recv, a padded reduce_scatter).
    { id: "mean", op: "allreduce", input: "g", reduce: "mean", reorders: true },
    { id: "half", op: "allreduce", input: "i", reduce: "sum" },
    { id: "a2a", op: "all_to_all", input: "d" },
    { id: "a2av", op: "all_to_allv", input: "d", counts: [[100, 0, 250, 1], [0, 0, 0, 0], [333, 7, 0, 600], [1, 1000, 0, 0]] },
    { id: "gather", op: "gather", input: "i", root: 2 },
    { id: "scatter", op: "scatter", input: "d", root: 1 },
    { id: "shift", op: "send_recv", input: "i", shift: -1 },
    { id: "rs", op: "reduce_scatter", input: "d", reduce: "mean", reorders: true },
    { id: "coalesced", op: "reduce_scatter", inputs: ["g", "g"], coalesced: true, reorders: true },
  ];
  if (quantized) {
    stages.push(
      { id: "qgz", op: "quantized_allreduce", input: "g", bits: 4, groupSize: 256, localSize: 2, errorFeedback: { beta: 1 } },
      { id: "qgz_full", op: "quantized_allreduce", input: "h", groupSize: 100, output: "full", reduce: "mean", nodes: 2 },
    );
  }
  // `reorders`: a float reduction whose sums each backend adds in its own order; not part of the job.
  const reorders = stages.filter((s) => s.reorders).map((s) => s.id);
  return { job: { name: "device-memory", iterations: 3, warmup: 1, check: true, tensors, stages: stages.map(({ reorders: _, ...s }) => s) }, reorders };
}

/** Runs `job` on W ranks; returns the result document and every dump file's bytes by relative path. */
async function run(job, { env = {}, backend } = {}) {
  const launch = (world, args) => runRanks(world, args, { env });
  const { dir, json, dumpDir, run } = prepareJob(W, job, { dump: true, launch, extraArgs: backend ? ["--backend", backend] : [] });
  try {
    const ranks = await run();
    ranks.forEach((p, r) => assert.equal(p.code, 0, `rank ${r} exited ${p.code}: ${p.stderr}`));
    const dumps = new Map();
    for (const stage of readdirSync(dumpDir)) {
      for (const file of readdirSync(path.join(dumpDir, stage))) dumps.set(`${stage}/${file}`, readFileSync(path.join(dumpDir, stage, file)));
    }
    return { doc: JSON.parse(readFileSync(json, "utf8")), dumps };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The device run's dumps and rows against the shm run's: the same bytes, the same errors and wire bytes. */
function assertSameAsShm(device, shm, backend, reorders) {
  assert.equal(device.doc.backend, backend);
  assert.deepEqual([...device.dumps.keys()].sort(), [...shm.dumps.keys()].sort(), "the same dump files");
  for (const [file, bytes] of shm.dumps) {
    if (reorders.includes(file.split("/")[0]) && file.endsWith("output.npy")) continue;
    assert.ok(bytes.equals(device.dumps.get(file)), `${file} differs from shm's`);
  }
  for (const row of shm.doc.results) {
    const other = device.doc.results.find((r) => r.stage === row.stage);
    assert.equal(other.wrong, row.wrong, `${row.stage}: #wrong`);
    if (row.wrong !== null) assert.equal(other.wrong, 0, `${row.stage}: checked element by element`);
    // The same outputs; the exact results they are measured against are float64 sums in each backend's order.
    const close = (a, b) => a === b || Math.abs(a - b) <= 1e-12 * Math.abs(b);
    assert.ok(close(other.rel_error, row.rel_error), `${row.stage}: rel_error ${other.rel_error}, shm ${row.rel_error}`);
    (row.rel_error_by_step ?? []).forEach((e, i) => assert.ok(close(other.rel_error_by_step[i], e), `${row.stage}: rel_error of step ${i}`));
    assert.equal(other.wire_bytes, row.wire_bytes, `${row.stage}: wire bytes`);
  }
}

/**
 * Each of `stages` of `job` alone on W ranks: every rank exits 1 with one line naming the stage and `why`.
 * The refusal comes after the ranks meet, right after the exchange of hosts, so rank 0 refuses and closes the
 * store while another rank's request for that exchange may still be on its way: the store still answers it
 * (StoreServer.close), and that rank then refuses too instead of naming rank 0 as gone.
 */
async function assertRefused(job, stages, env, why) {
  for (const stage of stages) {
    const { dir, run: alone } = prepareJob(W, { ...job, stages: [stage] }, { launch: (world, args) => runRanks(world, args, { env }) });
    try {
      for (const p of await alone()) {
        assert.equal(p.code, 1, p.stderr);
        assert.match(p.stderr, new RegExp(`stage ${stage.id}: .*${why.source}`));
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
}

test("device cuda over the NCCL double: 1-bit, quantized (ncclCommSplit) and kernel-needing exact stages match shm byte for byte", { timeout: 300_000 }, async (t) => {
  const { job, reorders } = estimatingJob();
  const { native } = await import("../dist/comm/native.js");
  if (!native().cudaKernels) {
    t.diagnostic("this build embeds no CUDA kernels (no nvcc): the stages that need them are refused");
    const needing = job.stages.filter((s) => ["onebit", "mean", "half", "qgz"].includes(s.id));
    return assertRefused({ ...job, device: "cuda" }, needing, { NCCL_LIBRARY: NCCL }, /CUDA kernels: none in this build \(built without nvcc\)/);
  }
  const shm = await run(job, { backend: "shm" });
  const estimating = shm.doc.results.filter((r) => r.rel_error !== null);
  assert.ok(estimating.length >= 3 && estimating.every((r) => r.rel_error > 0 && r.rel_error < 3), "estimates were measured");
  const cuda = await run({ ...job, device: "cuda" }, { env: { NCCL_LIBRARY: NCCL } });
  assertSameAsShm(cuda, shm, "nccl", reorders);
  assert.equal(cuda.doc.results.find((r) => r.stage === "mean").algorithm, "nccl", "auto runs NCCL's own allreduce in device memory");
  assert.equal(cuda.doc.results.find((r) => r.stage === "gather").algorithm, "direct", "gather is one exchange in device memory");
});

test("device npu over the HCCL double: the stages that need no kernels match shm; those that need them are refused", { timeout: 300_000 }, async () => {
  const { job, reorders } = estimatingJob({ quantized: false });
  const KERNELS = ["onebit", "onebit_bf16", "onebit_f64", "mean", "half", "rs"];
  const exact = { ...job, stages: job.stages.filter((s) => !KERNELS.includes(s.id)) };
  const shm = await run(exact, { backend: "shm" });
  const npu = await run({ ...exact, device: "npu" }, { env: { HCCL_LIBRARY: HCCL } });
  assertSameAsShm(npu, shm, "hccl", reorders);
  const all = estimatingJob().job;
  const needing = all.stages.filter((s) => ["onebit", "mean", "half", "qgz_full"].includes(s.id));
  await assertRefused({ ...all, device: "npu" }, needing, { HCCL_LIBRARY: HCCL }, /hccl: this build has no NPU kernels/);
});

test("a job too big for the device: every rank refuses it before meeting, naming the device, the runtime's free bytes and the largest piece", async () => {
  const job = { name: "too-big", device: "cuda", iterations: 1, warmup: 0, tensors: { g: { dtype: "float32", count: "16Mi" } }, stages: [{ id: "ar", op: "allreduce", input: "g" }] };
  const cases = [["cuda", { NCCL_LIBRARY: NCCL }, "cudaMemGetInfo"], ["npu", { HCCL_LIBRARY: HCCL }, "aclrtGetMemInfo"]];
  for (const [device, library, call] of cases) {
    const env = { ...library, SPMD_DOUBLE_DEVICE_BYTES: String(32 * 2 ** 20) };
    const { dir, run: ranks } = prepareJob(2, { ...job, device }, { launch: (world, args) => runRanks(world, args, { env }) });
    try {
      const t0 = Date.now();
      for (const [r, p] of (await ranks()).entries()) {
        assert.equal(p.code, 2, p.stderr);
        assert.equal(p.stderr.trim().split("\n").length, 1, p.stderr);
        assert.match(p.stderr, new RegExp(`memory: a rank needs [\\d.]+ MiB \\(\\d+ bytes\\) on device ${device}:${r}, the largest piece .*, but only 32 MiB \\(33554432 bytes\\) is available \\(${call} on ${device}:${r}\\)`));
      }
      assert.ok(Date.now() - t0 < 20_000, "refused before the ranks meet, not at a deadline");
      // validate -n checks against the host's first device where its runtime loads, and gives the bytes.
      const file = path.join(dir, "job.json");
      const v = await runNode([RUNNER, "validate", "-n", "2", file], env);
      assert.equal(v.code, 2, v.stderr);
      assert.match(v.stderr, new RegExp(`memory: a rank needs [\\d.]+ MiB \\(\\d+ bytes\\) on device ${device}:0, .*\\(${call} on ${device}:0\\)`));
      const fits = await runNode([RUNNER, "validate", "-n", "2", file], library);
      assert.match(fits.stdout, new RegExp(`ok \\(.*; 192 MiB per rank, 192 MiB of them on its ${device} device\\)`), fits.stderr);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  // What fits runs: the same job under the doubles' default 80 GiB.
  const { dir, run: fits } = prepareJob(2, job, { launch: (world, args) => runRanks(world, args, { env: { NCCL_LIBRARY: NCCL } }) });
  try {
    for (const p of await fits()) assert.equal(p.code, 0, p.stderr);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a device allocation refused after the plan passed (memory another process took): every rank names the tensor or stage and the bytes", async () => {
  // A 16 MiB tensor fits under the doubles' refusal at 20 MiB; the all_gather's 32 MiB output does not, and
  // the 64 MiB tensor of the second job does not either.
  const jobs = [
    { count: "4Mi", stages: [{ id: "ag", op: "all_gather", input: "g" }], refused: "stage ag: output: %s: cannot allocate 33554432 bytes \\(out of memory\\)" },
    { count: "16Mi", stages: [{ id: "ar", op: "allreduce", input: "g" }], refused: "tensor g: %s: cannot allocate 67108864 bytes \\(out of memory\\)" },
  ];
  const cases = [["cuda", { NCCL_LIBRARY: NCCL }, "CUDA device memory \\(cudaMalloc\\)"], ["npu", { HCCL_LIBRARY: HCCL }, "NPU device memory \\(aclrtMalloc\\)"]];
  for (const { count, stages, refused } of jobs) {
    for (const [device, library, runtime] of cases) {
      const job = { name: "refused", device, iterations: 1, warmup: 0, tensors: { g: { dtype: "float32", count } }, stages };
      const env = { ...library, SPMD_DOUBLE_MALLOC_REFUSE_ABOVE: String(20 * 2 ** 20) };
      const { dir, run: ranks } = prepareJob(2, job, { launch: (world, args) => runRanks(world, args, { env }) });
      try {
        for (const p of await ranks()) {
          assert.equal(p.code, 1, p.stderr);
          assert.match(p.stderr, new RegExp(`^runner \\(rank \\d\\): ${refused.replace("%s", runtime)}$`, "m"), p.stderr);
          assert.doesNotMatch(p.stderr, /bad_alloc|\n\s+at /);
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
  }
});

test("an NCCL without ncclCommSplit: the quantized allreduce is refused naming it, the 1-bit one still runs", { timeout: 300_000 }, async () => {
  const job = { ...estimatingJob().job, device: "cuda" };
  const { run: quantized } = prepareJob(2, { ...job, stages: [job.stages.find((s) => s.id === "qgz_full")] }, {
    launch: (world, args) => runRanks(world, args, { env: { NCCL_LIBRARY: NCCL_MINIMAL } }),
  });
  for (const p of await quantized()) {
    assert.equal(p.code, 1);
    assert.match(p.stderr, /stage qgz_full: nccl: sub-communicators \(a quantized_allreduce's nodes\) need ncclCommSplit \(NCCL 2\.18 or later\), which .*libspmd_nccl_double_minimal\.so lacks/);
  }
  const { run: onebit } = prepareJob(2, { ...job, stages: [job.stages[0]] }, {
    launch: (world, args) => runRanks(world, args, { env: { NCCL_LIBRARY: NCCL_MINIMAL } }),
  });
  for (const p of await onebit()) assert.equal(p.code, 0, p.stderr);
});

test("runner info: whether this build embeds CUDA kernels, and for which GPUs; nccl lists a missing ncclCommSplit", async () => {
  const { native } = await import("../dist/comm/native.js");
  const kernels = native().cudaKernels;
  const info = await runNode([RUNNER, "info"], { NCCL_LIBRARY: NCCL_MINIMAL });
  if (kernels) {
    assert.match(kernels.archs, /^(sm_\d+ )*compute_\d+$/);
    assert.ok(kernels.bytes > 1000);
    assert.match(info.stdout, new RegExp(`cuda kernels: built for ${kernels.archs} \\(${kernels.bytes} bytes of fatbins\\)`));
  } else {
    assert.match(info.stdout, /cuda kernels: not built \(no nvcc at build time\)/);
  }
  assert.match(info.stdout, /without ncclCommGetAsyncError, ncclGetErrorString, ncclCommSplit\)/);
});
