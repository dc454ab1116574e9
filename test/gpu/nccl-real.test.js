// Run by scripts/gpu-check.sh on a machine with an NVIDIA GPU (not by `npm test`): a one-rank job on
// device "cuda", so `auto` picks the nccl backend over the real NCCL, every stage checked element by
// element by the runner and against the reference from the dumps.
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import { test } from "node:test";
import { prepareJob, smallJob, verifyDumps } from "../helpers/matrix.js";

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
