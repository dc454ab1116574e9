// Every stage at world sizes 1, 2, 3, 4 and 8 (8 ranks on 2 cores), counts 0, 1, 7 and 1003 in every
// dtype and reduction, checked element by element here in JavaScript from the inputs each rank dumped,
// and counts of 1000003 checked element by element by the runner's own check (--check).
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import { test } from "node:test";
import { bigJob, prepareJob, smallJob, verifyDumps } from "./helpers/matrix.js";

const WORLDS = [1, 2, 3, 4, 8];

for (const W of WORLDS) {
  test(`every stage, counts 0/1/7/1003, every dtype and reduction, W=${W}: exact element by element`, async () => {
    const job = smallJob(W);
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
    const job = bigJob(W);
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
