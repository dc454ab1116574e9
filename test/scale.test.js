// tcp at scale (issue #21): connections open on first use, to the peers the algorithms talk to, so a rank's
// descriptors grow with those peers (ring: 2, tree and dissemination: log W), not with W. 48 tcp ranks of a
// small job each stay under 64 open descriptors, sampled from /proc while they run, and all of them run
// under `ulimit -n 96`, which a full mesh (some 170 descriptors per rank at W = 48) could not live with.
// Rank 0 also serves the TCP store the ranks met over, as torch's TCPStore does: one connection per rank,
// counted apart (its sockets are those whose local port is the store's).
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { freePort, rankEnv, spawnRunner } from "./helpers/ranks.js";

const W = 48;
const LIMIT = 64;
const SAMPLE_MS = 50;

const JOB = {
  name: "scale", iterations: 3, warmup: 1, check: true, timeoutSec: 300,
  tensors: { t: { dtype: "float32", count: 1000, fill: { kind: "integers", seed: 1 } } },
  stages: [
    { id: "ar", op: "allreduce", input: "t", algorithm: "ring" },
    { id: "bc", op: "broadcast", input: "t", root: 0, algorithm: "tree" },
    { id: "ga", op: "gather", input: "t", root: 0, algorithm: "tree" },
  ],
};

/** The process's open descriptors, less the sockets on local port `apart` (the store rank 0 serves). */
function openDescriptors(pid, apart) {
  try {
    const fds = readdirSync(`/proc/${pid}/fd`);
    if (apart === undefined) return fds.length;
    const inodes = new Set();
    for (const table of ["tcp", "tcp6"]) {
      for (const line of readFileSync(`/proc/${pid}/net/${table}`, "utf8").split("\n").slice(1)) {
        const cols = line.trim().split(/\s+/);
        if (cols.length > 9 && parseInt(cols[1].split(":")[1], 16) === apart) inodes.add(cols[9]);
      }
    }
    const served = fds.filter((fd) => inodes.has(/^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1] ?? "")).length;
    return fds.length - served;
  } catch {
    return 0; // exited
  }
}

test(`W = ${W} tcp ranks under ulimit -n 96: each holds fewer than ${LIMIT} descriptors, every element right`, { timeout: 600_000 }, async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-scale-"));
  try {
    const job = path.join(dir, "job.json"), config = path.join(dir, "run.json");
    writeFileSync(job, JSON.stringify(JOB));
    // 48 Node processes start on however few cores CI has: the ranks meet well after the default deadline.
    writeFileSync(config, JSON.stringify({ connectTimeoutSec: 300 }));
    const port = await freePort();
    // `exec`: the rank is the shell's own process, so its pid is the one sampled.
    const wrap = ["bash", "-c", 'ulimit -n 96 && exec "$0" "$@"'];
    const ranks = Array.from({ length: W }, (_, r) =>
      spawnRunner([job, "--backend", "tcp", "--config", config, "--out", dir, "--quiet"], rankEnv(r, W, port), { wrap }),
    );
    const peak = new Array(W).fill(0);
    const sampler = setInterval(() => ranks.forEach((r, i) => (peak[i] = Math.max(peak[i], openDescriptors(r.pid, i === 0 ? port : undefined)))), SAMPLE_MS);
    const results = await Promise.all(ranks.map((r) => r.exited)).finally(() => clearInterval(sampler));
    results.forEach((r, i) => assert.equal(r.code, 0, `rank ${i}: ${r.stderr}`));
    assert.ok(peak.every((n) => n > 0), "every rank was sampled while it ran");
    t.diagnostic(`peak descriptors: rank 0 ${peak[0]} besides the store's, other ranks ${Math.min(...peak.slice(1))} to ${Math.max(...peak.slice(1))}`);
    const over = peak.map((n, i) => [i, n]).filter(([, n]) => n >= LIMIT);
    assert.deepEqual(over, [], `ranks at or over ${LIMIT} descriptors (rank, peak): ${JSON.stringify(over)}; all peaks: ${peak.join(" ")}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
