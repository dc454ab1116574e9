// A short soak for CI: 2000 steps of the mixed job in scripts/soak.mjs on 4 ranks (shm), each rank's
// resident memory and open file descriptors sampled from /proc. Over the steady runs memory may grow at
// most 8 MiB (a V8 heap step of a few MiB can fall there in so short a run; `node scripts/soak.mjs` runs
// 10 000 steps against 4 MiB) and descriptors not at all; every element checked is right.
import assert from "node:assert/strict";
import { test } from "node:test";
import { soak } from "../scripts/soak.mjs";

test("soak: 2000 steps of a mixed job on 4 ranks, no memory or descriptor growth beyond the bound", { timeout: 120_000 }, async () => {
  const r = await soak({ steps: 2000, world: 4, runs: 10, maxRssGrowthMiB: 8 });
  const summary = r.ranks.map((k) => `rank ${k.rank}: rss ${k.rss.firstSteadyMiB.toFixed(1)} -> ${k.rss.lastSteadyMiB.toFixed(1)} MiB, fds ${k.fds.warmup} -> ${k.fds.lastSteady}`);
  console.log(`# ${summary.join("; ")}`);
  assert.equal(r.wrong, 0, r.log.join("\n"));
  assert.ok(r.ok, summary.join("\n"));
});
