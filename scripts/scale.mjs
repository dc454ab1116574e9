#!/usr/bin/env node
// Scale: what one rank costs as the world grows. For each world size W, W ranks of a tiny tcp job (ring
// allreduce, tree broadcast, tree gather; 1 step) start as separate processes meeting over the TCP store,
// and per rank we record the start-up time (spawn to its first op), CPU seconds, peak resident memory (GNU
// time), peak open descriptors (/proc/PID/fd, sampled) and, for rank 1 (a rank that writes no report), the
// package's files it opened (strace, where installed); then one rank's CPU with a core to itself.
// docs/PERFORMANCE.md ("Scale") keeps a table of it.
//
//   node scripts/scale.mjs [--worlds 8,16,32,48,64,128] [--json FILE]
//
// Linux only (/proc, GNU time at /usr/bin/time).
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { scriptArgs } from "./args.mjs";
import { freePort } from "./soak.mjs";

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const RUNNER = path.join(REPO, "runner");
const SAMPLE_MS = 50;
const hasStrace = !spawnSync("strace", ["-V"]).error;

export const JOB = {
  name: "scale", iterations: 1, warmup: 0, check: true, timeoutSec: 300,
  tensors: { t: { dtype: "float32", count: 1024, fill: { kind: "integers", seed: 1 } } },
  stages: [
    { id: "ar", op: "allreduce", input: "t", algorithm: "ring" },
    { id: "bc", op: "broadcast", input: "t", root: 0, algorithm: "tree" },
    { id: "ga", op: "gather", input: "t", root: 0, algorithm: "tree" },
  ],
};

/** Many Node processes start on however few cores there are: the ranks meet long after the default deadline. */
export const SLOW_START = { connectTimeoutSec: 600 };

/** The node process under a wrapper (GNU time, strace): the wrapper's first child, once it exists. */
function nodePid(wrapper) {
  try {
    return Number(readFileSync(`/proc/${wrapper}/task/${wrapper}/children`, "utf8").trim().split(" ")[0]) || undefined;
  } catch {
    return undefined;
  }
}

/** The process's open descriptors (0 once it has exited). */
export function openDescriptors(pid) {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return 0;
  }
}

/** Distinct files under the package that the strace log shows opened (successfully). */
function packageFiles(log) {
  const files = new Set();
  for (const line of readFileSync(log, "utf8").split("\n")) {
    const m = /openat\([^,]+, "([^"]+)".*\) = \d+$/.exec(line);
    if (m && path.resolve(REPO, m[1]).startsWith(REPO + path.sep)) files.add(m[1]);
  }
  return files.size;
}

/** One rank: GNU time around node (and strace where `trace`); resolves with its measurements. */
function startRank(rank, world, port, dir, args, trace = rank === 1 && hasStrace) {
  const timeFile = path.join(dir, `time${rank}`), traceFile = path.join(dir, `trace${rank}`);
  const traced = trace ? ["strace", "-f", "-e", "trace=openat", "-o", traceFile] : [];
  const env = { ...process.env, RANK: String(rank), WORLD_SIZE: String(world), LOCAL_RANK: String(rank), LOCAL_WORLD_SIZE: String(world), MASTER_ADDR: "127.0.0.1", MASTER_PORT: String(port) };
  const started = Date.now();
  const child = spawn("/usr/bin/time", ["-f", "%e %U %S %M", "-o", timeFile, ...traced, process.execPath, RUNNER, ...args], { cwd: REPO, env });
  const m = { rank, startupS: NaN, fds: 0, files: undefined };
  let stderr = "";
  child.stderr.on("data", (d) => {
    stderr += d;
    if (Number.isNaN(m.startupS) && /debug: running /.test(stderr)) m.startupS = (Date.now() - started) / 1000;
  });
  child.stdout.resume();
  const sampler = setInterval(() => {
    // Under strace the node process is strace's child, under time time's.
    let pid = nodePid(child.pid);
    if (pid && traced.length) pid = nodePid(pid);
    if (pid) m.fds = Math.max(m.fds, openDescriptors(pid));
  }, SAMPLE_MS);
  return new Promise((resolve) =>
    child.on("close", (code) => {
      clearInterval(sampler);
      const [wall, user, sys, rssKiB] = readFileSync(timeFile, "utf8").trim().split("\n").at(-1).split(" ").map(Number);
      if (traced.length) m.files = packageFiles(traceFile);
      resolve({ ...m, code, wallS: wall, cpuS: user + sys, rssMiB: rssKiB / 1024, stderr: code ? stderr.slice(-2000) : "" });
    }),
  );
}

const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];

/** Runs `body(dir, job)` with the scale job written to `job` in a fresh directory `dir`; removes it afterwards. */
async function withJob(body) {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-scale-"));
  try {
    const job = path.join(dir, "scale.json");
    writeFileSync(job, JSON.stringify(JOB));
    return await body(dir, job);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function measure(world) {
  return withJob(async (dir, job) => {
    const config = path.join(dir, "run.json");
    writeFileSync(config, JSON.stringify(SLOW_START));
    const port = await freePort();
    const args = [job, "--backend", "tcp", "--config", config, "--out", dir, "--quiet", "--log-level", "debug", "--log-all-ranks"];
    const t0 = Date.now();
    const ranks = await Promise.all(Array.from({ length: world }, (_, r) => startRank(r, world, port, dir, args)));
    const failed = ranks.filter((r) => r.code !== 0);
    if (failed.length) throw new Error(`W=${world}: ${failed.map((r) => `rank ${r.rank} exited ${r.code}: ${r.stderr.trim().split("\n").at(-1)}`).join("\n")}`);
    const plain = ranks.filter((r) => r.files === undefined);  // rank 1 under strace runs slower
    const col = (k) => plain.map((r) => r[k]);
    return {
      world,
      wallS: (Date.now() - t0) / 1000,
      startupS: { median: median(col("startupS")), max: Math.max(...col("startupS")) },
      cpuS: { median: median(col("cpuS")), max: Math.max(...col("cpuS")) },
      rssMiB: { median: median(col("rssMiB")), max: Math.max(...col("rssMiB")) },
      fds: { median: median(ranks.map((r) => r.fds)), max: Math.max(...ranks.map((r) => r.fds)) },
      packageFilesRank1: ranks[1]?.files,
    };
  });
}

/**
 * One rank's CPU seconds with a core to itself, as on a cluster node with a core per rank: the table's ranks
 * share this machine's cores, W at a time, and each one's CPU time grows with the crowding. Rank 1 of 2 runs
 * the job as a user would (no debug logs), and rank 0 starts once rank 1 has; the median of `runs`.
 */
export function aloneCpu(runs = 5) {
  return withJob(async (dir, job) => {
    const cpu = [];
    for (let i = 0; i < runs; i++) {
      const port = await freePort();
      const args = [job, "--backend", "tcp", "--out", dir, "--quiet"];
      const rank1 = startRank(1, 2, port, dir, args, false);
      await new Promise((r) => setTimeout(r, 1500));
      const [r0, r1] = await Promise.all([startRank(0, 2, port, dir, args, false), rank1]);
      if (r0.code || r1.code) throw new Error(`a rank alone: ${r0.stderr || r1.stderr}`);
      cpu.push(r1.cpuS);
    }
    return median(cpu);
  });
}

function table(rows) {
  const f = (x, d = 2) => (x === undefined ? "-" : x.toFixed(d));
  const lines = [
    "| W | wall s | start-up s (median / max) | CPU s per rank (median / max) | peak RSS MiB (median) | open fds (median / max) | package files opened (rank 1) |",
    "|---|---|---|---|---|---|---|",
    ...rows.map((r) => `| ${r.world} | ${f(r.wallS, 1)} | ${f(r.startupS.median)} / ${f(r.startupS.max)} | ${f(r.cpuS.median)} / ${f(r.cpuS.max)} | ${f(r.rssMiB.median, 0)} | ${r.fds.median} / ${r.fds.max} | ${r.packageFilesRank1 ?? "-"} |`),
  ];
  return lines.join("\n");
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = scriptArgs(import.meta.url, { worlds: { type: "string", default: "8,16,32,48,64,128" }, json: { type: "string" } });
  const rows = [];
  for (const w of values.worlds.split(",").map(Number)) {
    rows.push(await measure(w));
    console.error(`W=${w} done`);
  }
  console.log(table(rows));
  console.log(`\nCPU s of one rank with a core to itself (rank 1 of 2, started alone, no debug logs; median of 5): ${(await aloneCpu()).toFixed(2)}`);
  if (values.json) writeFileSync(values.json, JSON.stringify(rows, null, 2) + "\n");
}
