// A short soak for CI: 2000 steps of the mixed job in scripts/soak.mjs on 4 ranks (shm), each rank's
// resident memory and open file descriptors sampled from /proc, against the script's bound (memory grows
// at most 32 MiB from the first run to the last but one, descriptors not at all); every element checked
// is right. `npm run soak` runs the full 10 000 steps.
import assert from "node:assert/strict";
import { test } from "node:test";
import { soak } from "../scripts/soak.mjs";

test("soak: 2000 steps of a mixed job on 4 ranks, no memory or descriptor growth beyond the bound", { timeout: 120_000 }, async () => {
  const r = await soak({ steps: 2000, world: 4, runs: 10 });
  const summary = r.ranks.map((k) => `rank ${k.rank}: rss ${k.rss.firstRunMiB.toFixed(1)} -> ${k.rss.comparedRunMiB.toFixed(1)} MiB, fds ${k.fds.firstRun} -> ${k.fds.comparedRun}`);
  console.log(`# ${summary.join("; ")}`);
  assert.equal(r.wrong, 0, r.log.join("\n"));
  assert.ok(r.ok, summary.join("\n"));
});
