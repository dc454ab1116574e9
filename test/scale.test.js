// tcp at scale (issue #21): connections open on first use, to the peers the algorithms talk to, so a rank's
// descriptors grow with those peers (ring: 2, tree and dissemination: log W), not with W. 48 tcp ranks of a
// small job each stay under 64 open descriptors, sampled from /proc while they run, and all of them run
// under `ulimit -n 96`, which a full mesh (some 170 descriptors per rank at W = 48) could not live with.
// Rank 0 also serves the TCP store the ranks meet over, counted with the rest: it serves a few connections at
// a time and answers waiting ranks by dialling them back (store.ts), so it holds none per rank.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { JOB, openDescriptors, SLOW_START } from "../scripts/scale.mjs";
import { freePort, rankEnv, spawnRunner } from "./helpers/ranks.js";
import { withTempDir } from "./helpers/tmp.js";

const W = 48;
const LIMIT = 64;
const SAMPLE_MS = 50;

test(`W = ${W} tcp ranks under ulimit -n 96: each holds fewer than ${LIMIT} descriptors, every element right`, { timeout: 600_000 }, (t) =>
  withTempDir("spmd-scale-", async (dir) => {
    const job = path.join(dir, "job.json"), config = path.join(dir, "run.json");
    // A few steps, so that every rank is sampled with its connections open.
    writeFileSync(job, JSON.stringify({ ...JOB, iterations: 3, warmup: 1 }));
    writeFileSync(config, JSON.stringify(SLOW_START));
    const port = await freePort();
    // `exec`: the rank is the shell's own process, so its pid is the one sampled.
    const wrap = ["bash", "-c", 'ulimit -n 96 && exec "$0" "$@"'];
    const ranks = Array.from({ length: W }, (_, r) =>
      spawnRunner([job, "--backend", "tcp", "--config", config, "--out", dir, "--quiet"], rankEnv(r, W, port), { wrap }),
    );
    const peak = new Array(W).fill(0);
    const sampler = setInterval(() => ranks.forEach((r, i) => (peak[i] = Math.max(peak[i], openDescriptors(r.pid)))), SAMPLE_MS);
    const results = await Promise.all(ranks.map((r) => r.exited)).finally(() => clearInterval(sampler));
    results.forEach((r, i) => assert.equal(r.code, 0, `rank ${i}: ${r.stderr}`));
    assert.ok(peak.every((n) => n > 0), "every rank was sampled while it ran");
    t.diagnostic(`peak descriptors: rank 0 ${peak[0]}, other ranks ${Math.min(...peak.slice(1))} to ${Math.max(...peak.slice(1))}`);
    const over = peak.map((n, i) => [i, n]).filter(([, n]) => n >= LIMIT);
    assert.deepEqual(over, [], `ranks at or over ${LIMIT} descriptors (rank, peak): ${JSON.stringify(over)}; all peaks: ${peak.join(" ")}`);
  }));
