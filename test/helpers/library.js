// The NCCL and HCCL backends' shared expectations of a vendor library under test doubles.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";

/**
 * A library init that never returns (the double's SPMD_DOUBLE_STALL_INIT_RANK) ends every rank at the connect
 * deadline with one line naming `step`. `small(env, { args })` runs the library's 2-rank job.
 */
export async function assertInitDeadline(small, step) {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-init-"));
  try {
    const config = path.join(dir, "run.json");
    writeFileSync(config, JSON.stringify({ connectTimeoutSec: 3 }));
    const started = Date.now();
    const ranks = await small({ SPMD_DOUBLE_STALL_INIT_RANK: "1" }, { args: ["--config", config] });
    for (const p of ranks) {
      assert.equal(p.code, 1, p.stderr);
      assert.match(p.stderr, new RegExp(`${step} did not finish within 3 s`));
    }
    // Rank 0 holds the store, so it can always tell who arrived (another rank may find it gone by then).
    assert.match(ranks[0].stderr, new RegExp(`${step} did not finish within 3 s; every rank reached it`));
    assert.ok(Date.now() - started < 20_000, "ended at the deadline, not the double's 30 s");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The double's SPMD_DOUBLE_ASYNC_ERROR fails every rank's first op at once, naming the library's error
 * (`asyncError`, a RegExp). Rank 0 can fail and leave while another rank still reads the start-up records
 * from the store rank 0 serves: that rank then names rank 0 as gone, and no rank hangs.
 */
export async function assertAsyncError(small, asyncError) {
  const ranks = await small({ SPMD_DOUBLE_ASYNC_ERROR: "1" });
  for (const p of ranks) {
    assert.notEqual(p.code, 0);
    assert.match(p.stderr, new RegExp(`${asyncError.source}|rank 0, which serves the store, has left`));
  }
  assert.match(ranks[0].stderr, asyncError);
}
