// Run by scripts/gpu-check.sh on a machine with an NVIDIA GPU (not by `npm test`): one-rank jobs on device
// "cuda", so `auto` picks the nccl backend over the real NCCL. Every stage checked element by element by
// the runner and against the reference from the dumps; and the 1-bit and quantized allreduces, run on the
// GPU with the CUDA kernels, against the same job on shm, one step: quantized outputs and error state the
// same bits, 1-bit ones within a few ulps of their scale (a GPU adds sums of squares in another order, and
// a scale an ulp apart would, after a few steps of error feedback, flip the sign of a value near zero).
import assert from "node:assert/strict";
import { readdirSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { prepareJob, smallJob, verifyDumps } from "../helpers/matrix.js";
import { readNpy } from "../helpers/npy.js";

test("every stage on one GPU through the real NCCL (device cuda, backend auto)", async () => {
  const job = { ...smallJob(1, { auto: true }), device: "cuda" };
  const { dir, json, dumpDir, run } = prepareJob(1, job, { dump: true });
  try {
    const [rank] = await run();
    assert.equal(rank.code, 0, rank.stderr);
    const doc = JSON.parse(readFileSync(json, "utf8"));
    for (const row of doc.results) if (row.type) assert.equal(row.wrong, 0, `${row.stage}: ${row.wrong} wrong`);
    assert.equal(doc.results.find((row) => row.stage === "f32_1003.allreduce.auto").algorithm, "nccl");
    assert.ok(verifyDumps(job, 1, dumpDir) > 1000);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

const estimating = {
  name: "gpu-estimating", iterations: 1, warmup: 0,
  tensors: {
    g: { dtype: "float32", count: 1 << 20, fill: { kind: "normal", seed: 7 } },
    h: { dtype: "bfloat16", count: 40000, fill: { kind: "normal", seed: 3 } },
  },
  stages: [
    { id: "onebit", op: "compressed_allreduce", input: "g" },
    { id: "onebit_bf16", op: "compressed_allreduce", input: "h" },
    { id: "qgz", op: "quantized_allreduce", input: "g", bits: 4, errorFeedback: { beta: 1 } },
    { id: "qgz_full", op: "quantized_allreduce", input: "h", groupSize: 100, output: "full", reduce: "mean" },
  ],
};

async function dumps(job, extraArgs) {
  const { dir, dumpDir, run } = prepareJob(1, job, { dump: true, extraArgs });
  try {
    const [rank] = await run();
    assert.equal(rank.code, 0, rank.stderr);
    const files = new Map();
    for (const stage of readdirSync(dumpDir)) {
      for (const file of readdirSync(path.join(dumpDir, stage))) files.set(`${stage}/${file}`, path.join(dumpDir, stage, file));
    }
    return { dir, files };
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

test("the 1-bit and quantized allreduces on the GPU (CUDA kernels) match shm's", { timeout: 300_000 }, async () => {
  const gpu = await dumps({ ...estimating, device: "cuda" }, []);
  const cpu = await dumps(estimating, ["--backend", "shm"]);
  try {
    assert.deepEqual([...gpu.files.keys()].sort(), [...cpu.files.keys()].sort());
    for (const [name, file] of cpu.files) {
      const other = gpu.files.get(name);
      if (name.startsWith("qgz")) {
        assert.ok(readFileSync(file).equals(readFileSync(other)), `${name}: not the same bits`);
        continue;
      }
      const want = readNpy(file, { bfloat16: true }).values, got = readNpy(other, { bfloat16: true }).values;
      // bfloat16 outputs round the scaled signs to 8 bits: an ulp of the scale may move them by one of theirs.
      const tolerance = (name.includes("bf16") && name.endsWith("output.npy") ? 2 ** -7 : 2 ** -20) * want.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
      want.forEach((v, i) => {
        if (!(Math.abs(got[i] - v) <= tolerance)) assert.fail(`${name} element ${i}: ${got[i]}, shm ${v}`);
      });
    }
  } finally {
    rmSync(gpu.dir, { recursive: true, force: true });
    rmSync(cpu.dir, { recursive: true, force: true });
  }
});
