// Every stage and algorithm (auto: the shm backend's shared ones) at world sizes 1, 2, 3, 4 and 8 (8 ranks
// on 2 cores), counts 0, 1, 7 and 1003 in every dtype and reduction, checked element by element here in
// JavaScript from the inputs each rank dumped, and counts of 1000003 (many chunks through the shared slots)
// checked element by element by the runner's own check (--check); and the coalesced reduce_scatter's
// layout (DeepSpeed's reduce_scatter_coalesced) on the lengths where it is easiest to get wrong.
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { bigJob, prepareJob, smallJob, verifyDumps } from "./helpers/matrix.js";
import { readNpy } from "./helpers/npy.js";

const WORLDS = [1, 2, 3, 4, 8];

for (const W of WORLDS) {
  test(`every stage, counts 0/1/7/1003, every dtype and reduction, W=${W}: exact element by element`, async () => {
    const job = smallJob(W, { auto: true });  // auto: the shm backend's shared algorithms
    const { dir, json, dumpDir, run } = prepareJob(W, job, { dump: true });
    try {
      const ranks = await run();
      ranks.forEach((p, r) => assert.equal(p.code, 0, `rank ${r} exited ${p.code}: ${p.stderr}`));
      const doc = JSON.parse(readFileSync(json, "utf8"));
      assert.equal(doc.world_size, W);
      assert.equal(doc.results.length, job.stages.length);
      for (const row of doc.results) if (row.type) assert.equal(row.wrong, 0, `${row.stage}: runner's check found ${row.wrong} wrong`);
      const compared = verifyDumps(job, W, dumpDir);
      assert.ok(compared > 1000 * W, `compared only ${compared} elements`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test(`every stage at count 1000003, W=${W}: runner's element-by-element check finds 0 wrong`, async () => {
    const job = bigJob(W, { auto: true });
    const { dir, json, run } = prepareJob(W, job);
    try {
      const ranks = await run();
      ranks.forEach((p, r) => assert.equal(p.code, 0, `rank ${r} exited ${p.code}: ${p.stderr}`));
      const doc = JSON.parse(readFileSync(json, "utf8"));
      assert.equal(doc.results.length, job.stages.length);
      for (const row of doc.results) {
        assert.equal(row.wrong, 0, `${row.stage}: ${row.wrong} wrong`);
        assert.ok(row.time.avg_us > 0, `${row.stage}: no time`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

// DESIGN.md: tensor i is cut into W blocks of ceil(n_i/W), the last ones short or empty; rank r gets block r
// of every tensor, in the order the stage lists them. `lengths[r]`: what rank r must hold in all.
for (const { W, counts, lengths } of [
  { W: 2, counts: [1], lengths: [1, 0] },
  { W: 3, counts: [1, 2, 3, 4, 5, 7, 0, 1003], lengths: [10 + 335, 9 + 335, 3 + 333] },
  { W: 4, counts: [3, 1, 6], lengths: [1 + 1 + 2, 1 + 0 + 2, 1 + 0 + 2, 0 + 0 + 0] },
]) {
  test(`coalesced reduce_scatter, W=${W}, tensors of ${counts.join("/")}: every element on every rank`, async () => {
    const tensors = Object.fromEntries(counts.map((n, k) => [`t${k}`, { dtype: "float32", count: n, fill: { kind: "integers", seed: 40 + k, low: -9, high: 9 } }]));
    const names = Object.keys(tensors);
    const job = {
      name: `coalesced-${W}`, iterations: 1, warmup: 1, check: true, tensors,
      stages: [
        { id: "sum", op: "reduce_scatter", inputs: names, coalesced: true },
        { id: "mean_reversed", op: "reduce_scatter", inputs: [...names].reverse(), coalesced: true, reduce: "mean" },
      ],
    };
    const { dir, json, dumpDir, run } = prepareJob(W, job, { dump: true });
    try {
      const ranks = await run();
      ranks.forEach((p, r) => assert.equal(p.code, 0, `rank ${r} exited ${p.code}: ${p.stderr}`));
      for (const row of JSON.parse(readFileSync(json, "utf8")).results) assert.equal(row.wrong, 0, `${row.stage}: runner's check`);
      verifyDumps(job, W, dumpDir);
      for (let r = 0; r < W; r++) {
        const out = readNpy(path.join(dumpDir, "sum", `rank${r}.output.npy`)).values;
        assert.equal(out.length, lengths[r], `rank ${r}: output length`);
      }
      if (counts.length === 1 && counts[0] === 1) {
        // One element on two ranks: rank 0 holds the sum, rank 1 nothing.
        const x = [0, 1].map((r) => readNpy(path.join(dumpDir, "sum", `rank${r}.input.npy`)).values[0]);
        assert.deepEqual(readNpy(path.join(dumpDir, "sum", "rank0.output.npy")).values, [x[0] + x[1]]);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}
