// Faults end every rank promptly with a message naming the culprit, and leave nothing behind.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { freePort, REPO, RUNNER, shmLeftovers } from "./helpers/ranks.js";

test("kill -9 of one rank mid-run: the others exit non-zero within seconds naming it (shm)", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-fault-"));
  try {
    const job = path.join(dir, "long.json");
    writeFileSync(job, JSON.stringify({
      name: "long", iterations: 1000000, warmup: 0,
      tensors: { t: { dtype: "float32", count: "256Ki" } },
      stages: [{ id: "ar", op: "allreduce", input: "t" }],
    }));
    const port = String(await freePort());
    const W = 3, victim = 1;
    const ranks = Array.from({ length: W }, (_, rank) => {
      const child = spawn(process.execPath, [RUNNER, job, "--out", dir, "--log-level", "debug", "--log-all-ranks"], {
        cwd: REPO,
        env: { ...process.env, RANK: String(rank), WORLD_SIZE: String(W), LOCAL_RANK: String(rank), LOCAL_WORLD_SIZE: String(W), MASTER_ADDR: "127.0.0.1", MASTER_PORT: port },
      });
      let stderr = "";
      const running = new Promise((resolve) => child.stderr.on("data", (d) => {
        stderr += d;
        if (/running 1 stages/.test(stderr)) resolve();
      }));
      const exited = new Promise((resolve) => child.on("close", (code) => resolve({ code, stderr })));
      return { child, running, exited };
    });
    await Promise.all(ranks.map((r) => r.running));
    await new Promise((r) => setTimeout(r, 300));
    const killedAt = Date.now();
    ranks[victim].child.kill("SIGKILL");
    const results = await Promise.all(ranks.map((r) => r.exited));
    const took = Date.now() - killedAt;
    assert.ok(took < 10_000, `survivors took ${took} ms to exit`);
    for (const [rank, r] of results.entries()) {
      if (rank === victim) continue;
      assert.notEqual(r.code, 0, `rank ${rank} should fail`);
      assert.match(r.stderr, /rank 1 \(pid \d+\) died/, `rank ${rank} names the dead rank:\n${r.stderr}`);
    }
    assert.deepEqual(shmLeftovers(ranks.map((r) => r.child.pid)), []);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
