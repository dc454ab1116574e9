// Every file in jobs/ runs as a user would start it: `node runner launch -n 4 jobs/X.json`, with the
// iterations cut to one (--iterations 1 --warmup 0) but every sweep point run; a job that records its world
// size (a replayed trace's `worldSize`) runs at that size, the only one it takes. The list is read from the
// folder, so a new example is covered the moment it is added.
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { loadJob } from "../dist/config/load.js";
import { sweepPoints } from "../dist/graph/sweep.js";
import { REPO, RUNNER, runNode } from "./helpers/ranks.js";

const JOBS = readdirSync(path.join(REPO, "jobs")).filter((f) => f.endsWith(".json")).sort();

test("jobs/ holds the shipped examples", () => {
  for (const known of ["onebit.json", "qgz.json", "quickstart.json", "resnet-ddp-replay.json"]) assert.ok(JOBS.includes(known), `jobs/${known} is missing`);
});

for (const file of JOBS) {
  const job = loadJob(path.join(REPO, "jobs", file));
  const W = job.worldSize ?? 4;
  test(`node runner launch -n ${W} jobs/${file} runs every sweep point`, { timeout: 900_000 }, async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-jobs-"));
    try {
      const json = path.join(dir, "r.json");
      const args = [RUNNER, "launch", "-n", String(W), `jobs/${file}`, "--iterations", "1", "--warmup", "0", "--out", dir, "--json", json];
      const p = await runNode(args, {}, 880_000);
      assert.equal(p.code, 0, `exit ${p.code}:\n${p.stderr}`);
      const doc = JSON.parse(readFileSync(json, "utf8"));
      const points = sweepPoints(job).length;
      assert.equal(doc.results.length, job.stages.length * points, `${job.stages.length} stages × ${points} sweep points`);
      for (const row of doc.results) {
        if (row.wrong !== null) assert.equal(row.wrong, 0, `${row.stage} at ${row.count}: ${row.wrong} wrong`);
        if (row.rel_error !== null) assert.ok(Number.isFinite(row.rel_error) && row.rel_error < 1, `${row.stage} at ${row.count}: rel_error ${row.rel_error}`);
      }
      // The table on stdout ends as nccl-tests' does.
      assert.match(p.stdout, /# Avg bus bandwidth {4}: \d+\.\d{4}/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}
