#!/usr/bin/env node
// Soak: many steps of a mixed job (every kind of stage, both lanes, the 1-bit stage's state) on several
// ranks, split over repeated runs so the JavaScript side and the native boundary are exercised too, while
// each rank's resident memory and open file descriptors are sampled from /proc. A leak per step or per run
// shows as growth from the first run to the last; the bounds are stated, the numbers printed, and the
// exit code says whether they held.
//
//   node scripts/soak.mjs [--steps 10000] [--ranks 4] [--runs 10] [--mpi] [--max-rss-growth-mib 32] [--json FILE]
//
// Linux only (/proc). Ranks meet over the TCP store and use shm, or run under mpirun with --mpi.
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { scriptArgs } from "./args.mjs";

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const RUNNER = path.join(REPO, "runner");
const SAMPLE_MS = 50;
const COUNT = 4096;

/** The job: `runs` sweep points of the same count, `steps / runs` timed steps each. */
function soakJob(steps, runs) {
  return {
    name: "soak",
    iterations: Math.ceil(steps / runs),
    warmup: 0,
    check: true,
    timeoutSec: 120,
    tensors: {
      x: { dtype: "float32", count: COUNT, fill: { kind: "normal", seed: 1 } },
      y: { dtype: "float32", count: COUNT, fill: { kind: "integers", seed: 2 } },
      h: { dtype: "bfloat16", count: COUNT, fill: { kind: "integers", seed: 3 } },
      n: { dtype: "int32", count: COUNT, fill: { kind: "integers", seed: 4 } },
    },
    stages: [
      { id: "ar_ring", op: "allreduce", input: "y", algorithm: "ring" },
      { id: "ar_tree", op: "allreduce", input: "h", algorithm: "tree" },
      { id: "ar_max", op: "allreduce", input: "n", reduce: "max" },
      { id: "rs", op: "reduce_scatter", inputs: ["x", "y"], coalesced: true },
      { id: "ag", op: "all_gather", input: "n" },
      { id: "bc", op: "broadcast", input: "x", root: 1 },
      { id: "a2a", op: "all_to_all", input: "x" },
      { id: "sr", op: "send_recv", input: "h" },
      { id: "onebit", op: "compressed_allreduce", input: "x" },
      { id: "ig", op: "igather", input: "x", root: 0 },
      { id: "work", op: "compute", us: 50, after: ["ar_ring"] },
      { id: "sync", op: "barrier", after: ["ig", "work"] },
    ],
    sweep: { count: Array.from({ length: runs }, () => COUNT) },
  };
}

/** A TCP port free on 127.0.0.1 now, for the ranks' store. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer().once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function rssKiB(pid) {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) : NaN;
}

const openFds = (pid) => readdirSync(`/proc/${pid}/fd`).length;

/** The rank processes mpirun `pid` started: its children that carry a rank in their environment. */
function mpiRanks(pid, world) {
  const ranks = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) !== pid) continue;
      const m = /(?:^|\0)OMPI_COMM_WORLD_RANK=(\d+)\0/.exec(readFileSync(`/proc/${entry}/environ`, "utf8"));
      if (m) ranks[Number(m[1])] = Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  return ranks.filter((r) => r !== undefined).length === world ? ranks : undefined;
}

/** Starts the ranks; each line of their stderr goes to onLine(rank or -1, line). */
async function startRanks({ world, mpi, args, onLine }) {
  const children = [];
  const watch = (child, rank) => {
    let buffered = "";
    child.stderr.on("data", (d) => {
      buffered += d;
      const lines = buffered.split("\n");
      buffered = lines.pop();
      for (const line of lines) onLine(rank, line);
    });
    child.stdout.resume();
    return new Promise((resolve) => child.on("close", (code) => resolve(code)));
  };
  if (mpi) {
    const child = spawn("mpirun", ["--allow-run-as-root", "--oversubscribe", "-np", String(world), process.execPath, RUNNER, ...args], { cwd: REPO });
    children.push(child);
    return { pids: () => mpiRanks(child.pid, world), exited: watch(child, -1).then((code) => [code]) };
  }
  const port = await freePort();
  for (let rank = 0; rank < world; rank++) {
    const env = { ...process.env, RANK: String(rank), WORLD_SIZE: String(world), LOCAL_RANK: String(rank), LOCAL_WORLD_SIZE: String(world), MASTER_ADDR: "127.0.0.1", MASTER_PORT: String(port) };
    children.push(spawn(process.execPath, [RUNNER, ...args], { cwd: REPO, env }));
  }
  return { pids: () => children.map((c) => c.pid), exited: Promise.all(children.map((c, rank) => watch(c, rank))) };
}

/**
 * Runs the soak and returns per-rank samples and verdicts: each rank's peak resident memory and open file
 * descriptors per run, and whether the last run but one (the last is where rank 0 writes the report) stays
 * within the bound of the first. What grows without a leak: V8's heap, which keeps garbage until a full
 * collection and grows to its working size over the first 10-20 000 steps of this job (some 20 MiB,
 * flat after that to 40 000 steps in our measurements), and within a run the times of every op of every
 * step (8 bytes each, freed when the run ends). A leak of a few KiB per step exceeds the default bound.
 */
export async function soak({ steps = 10_000, world = 4, runs = 10, mpi = false, maxRssGrowthMiB = 32 } = {}) {
  if (runs < 3) throw new Error("soak: needs at least 3 runs (the first, the ones compared with it, the last)");
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-soak-"));
  try {
    const job = path.join(dir, "soak.json");
    const json = path.join(dir, "result.json");
    writeFileSync(job, JSON.stringify(soakJob(steps, runs)));
    // Which run each rank is in, from its "running ..." log line (one per sweep point).
    const run = Array(world).fill(0);
    const log = [];
    const started = Date.now();
    const ranks = await startRanks({
      world,
      mpi,
      args: [job, "--out", dir, "--json", json, "--log-level", "debug", "--log-all-ranks"],
      onLine: (rank, line) => {
        log.push(line);
        const m = /^\[rank (\d+)\] debug: running /.exec(line);
        if (m) run[Number(m[1])]++;
      },
    });
    const samples = Array.from({ length: world }, () => []);
    let pids;
    const sampler = setInterval(() => {
      pids ??= ranks.pids();
      if (!pids) return;
      pids.forEach((pid, r) => {
        if (run[r] === 0) return; // still starting up
        try {
          const sample = { run: run[r], rssKiB: rssKiB(pid), fds: openFds(pid), ms: Date.now() - started };
          if (Number.isFinite(sample.rssKiB)) samples[r].push(sample); // an exiting process has no VmRSS
        } catch {
          // the rank is exiting
        }
      });
    }, SAMPLE_MS);
    const codes = await ranks.exited;
    clearInterval(sampler);
    const failed = codes.some((c) => c !== 0);
    const result = failed ? undefined : JSON.parse(readFileSync(json, "utf8"));
    const wrong = result?.results.reduce((n, r) => n + (r.wrong ?? 0), 0);
    const peak = (list, key) => Math.max(...list.map((s) => s[key]));
    const perRank = samples.map((list, rank) => {
      const ofRun = (k) => list.filter((s) => s.run === k);
      const byRun = Array.from({ length: runs }, (_, k) => ({ rssMiB: peak(ofRun(k + 1), "rssKiB") / 1024, fds: peak(ofRun(k + 1), "fds") }));
      const first = byRun[0], compared = byRun[runs - 2];
      return {
        rank,
        samples: list.length,
        peakRssMiBByRun: byRun.map((r) => r.rssMiB),
        rss: { firstRunMiB: first.rssMiB, comparedRunMiB: compared.rssMiB },
        fds: { firstRun: first.fds, comparedRun: compared.fds },
        ok: Number.isFinite(first.rssMiB) && Number.isFinite(compared.rssMiB) && compared.rssMiB - first.rssMiB <= maxRssGrowthMiB && compared.fds <= first.fds,
      };
    });
    return {
      steps: soakJob(steps, runs).iterations * runs,
      world,
      runs,
      backend: result?.backend,
      seconds: (Date.now() - started) / 1000,
      bounds: { maxRssGrowthMiB, fdGrowth: 0 },
      wrong,
      ranks: perRank,
      ok: !failed && wrong === 0 && perRank.every((r) => r.ok),
      log: failed ? log.slice(-20) : [],
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function report(r) {
  const compared = r.runs - 1;
  const lines = [
    `soak: ${r.steps} steps in ${r.runs} runs on ${r.world} ranks (${r.backend ?? "failed"}), ${r.seconds.toFixed(1)} s, ${r.wrong ?? "?"} wrong`,
    `bounds: from run 1's peak to run ${compared}'s, resident memory grows at most ${r.bounds.maxRssGrowthMiB} MiB and open file descriptors not at all`,
    `rank  samples  rss run 1 (MiB)  rss run ${compared} (MiB)  growth (MiB)  fds run 1  fds run ${compared}  ok`,
    ...r.ranks.map((k) =>
      [
        String(k.rank).padStart(4),
        String(k.samples).padStart(9),
        k.rss.firstRunMiB.toFixed(1).padStart(17),
        k.rss.comparedRunMiB.toFixed(1).padStart(17),
        (k.rss.comparedRunMiB - k.rss.firstRunMiB).toFixed(1).padStart(14),
        String(k.fds.firstRun).padStart(11),
        String(k.fds.comparedRun).padStart(11),
        k.ok ? "  yes" : "   NO",
      ].join(""),
    ),
    "peak rss by run (MiB):",
    ...r.ranks.map((k) => `  rank ${k.rank}: ${k.peakRssMiBByRun.map((m) => m.toFixed(1)).join(" ")}`),
    ...r.log,
    r.ok ? "soak: ok" : "soak: FAILED",
  ];
  return lines.join("\n") + "\n";
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values } = scriptArgs(import.meta.url, {
    steps: { type: "string", default: "10000" },
    ranks: { type: "string", default: "4" },
    runs: { type: "string", default: "10" },
    mpi: { type: "boolean", default: false },
    "max-rss-growth-mib": { type: "string", default: "32" },
    json: { type: "string" },
  });
  const r = await soak({
    steps: Number(values.steps),
    world: Number(values.ranks),
    runs: Number(values.runs),
    mpi: values.mpi,
    maxRssGrowthMiB: Number(values["max-rss-growth-mib"]),
  });
  process.stdout.write(report(r));
  if (values.json) writeFileSync(values.json, JSON.stringify(r, null, 2) + "\n");
  process.exitCode = r.ok ? 0 : 1;
}
