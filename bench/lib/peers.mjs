// Running our runner and Open MPI's collectives through bench/ompi_coll.c (OSU is bench/lib/osu.mjs), the
// memcpy probe, and describing the machine.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { REPO } from "./options.mjs";
import { jobFor, ompiArgsFor } from "./plan.mjs";

export const BUILD = path.join(REPO, "bench/build");
export const OMPI_COLL = path.join(BUILD, "ompi_coll");
export const MEMCPY_BW = path.join(BUILD, "memcpy_bw");
const RUNNER = path.join(REPO, "runner");

// A launcher's variables in the harness's own environment would confuse the ranks' discovery.
const LAUNCHER_VARS = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"];

function childEnv() {
  const env = { ...process.env };
  for (const name of LAUNCHER_VARS) delete env[name];
  for (const name of Object.keys(env)) if (/^(OMPI_COMM_WORLD|PMIX_RANK|PMI_)/.test(name)) delete env[name];
  return env;
}

const which = (cmd) => spawnSync("sh", ["-c", `command -v ${cmd}`], { encoding: "utf8" }).stdout.trim() || null;

/** Why the Open MPI side cannot run here, or null when it can. */
export function mpiMissing() {
  if (!which("mpicc")) return "mpicc not found (install Open MPI: openmpi-bin libopenmpi-dev)";
  if (!which("mpirun")) return "mpirun not found (install Open MPI: openmpi-bin)";
  return null;
}

/** Runs a program; resolves with its exit code, output and wall time. Kills it (and says so) past timeoutMs. */
export function runProcess(program, args, { timeoutMs, cwd = REPO } = {}) {
  return new Promise((resolve) => {
    const started = performance.now();
    const child = spawn(program, args, { cwd, env: childEnv(), stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "", stderr = "", timedOut = false;
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = timeoutMs ? setTimeout(() => ((timedOut = true), child.kill("SIGKILL")), timeoutMs) : undefined;
    child.on("error", (err) => (stderr += `${err.message}\n`));
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? 128, signal, stdout, stderr, timedOut, ms: performance.now() - started });
    });
  });
}

/** Builds the two C programs into bench/build when missing or older than their sources. */
export function buildTools() {
  mkdirSync(BUILD, { recursive: true });
  const cc = which("cc") ? "cc" : "mpicc";
  const builds = [
    { out: OMPI_COLL, src: "bench/ompi_coll.c", cmd: ["mpicc", "-O2", "-Wall", "-o", OMPI_COLL, "bench/ompi_coll.c", "-lm"] },
    { out: MEMCPY_BW, src: "bench/memcpy_bw.c", cmd: [cc, "-O2", "-Wall", "-pthread", "-o", MEMCPY_BW, "bench/memcpy_bw.c"] },
  ];
  for (const b of builds) {
    const src = path.join(REPO, b.src);
    if (existsSync(b.out) && statSync(b.out).mtimeMs >= statSync(src).mtimeMs) continue;
    const r = spawnSync(b.cmd[0], b.cmd.slice(1), { cwd: REPO, encoding: "utf8" });
    if (r.error || r.status !== 0) throw new Error(`building ${b.src} failed: ${b.cmd.join(" ")}: ${(r.error?.message ?? r.stderr).trim().split("\n")[0]}`);
  }
}

function lastJson(stdout) {
  const line = stdout.trim().split("\n").reverse().find((l) => l.startsWith("{"));
  return line ? JSON.parse(line) : null;
}

const firstLine = (text) => text.trim().split("\n").filter(Boolean).slice(-1)[0] ?? "";

/**
 * `mpirun -np W` as a user types it, with its default binding (a core per rank while there are cores to
 * go round) unless the group's `bindTo` is "none": --oversubscribe lets W exceed the cores, and root needs
 * leave to run.
 */
export function mpirunArgs({ W, bindTo }) {
  const root = typeof process.getuid === "function" && process.getuid() === 0 ? ["--allow-run-as-root"] : [];
  const bind = bindTo === "none" ? ["--bind-to", "none"] : [];
  return ["mpirun", ...root, "--oversubscribe", ...bind, "-np", String(W)];
}

/** Our side unless told otherwise: the shm backend under `runner launch`. */
export const OURS = { backend: "shm", launcher: "launch" };

/**
 * The command that runs a group on our side (also what results.json records): `backend` under `launcher`
 * (`runner launch`, or mpirun in the same setting as the Open MPI baseline).
 */
export function oursCommand(group, jobFile, outDir, { backend, launcher } = OURS) {
  const rest = ["--backend", backend, jobFile, "--out", outDir, "--quiet", "--iterations", String(group.iterations), "--warmup", String(group.warmup)];
  if (launcher === "mpirun") return [...mpirunArgs(group), process.execPath, RUNNER, ...rest];
  return [process.execPath, RUNNER, "launch", "-n", String(group.W), ...rest];
}

export function ompiCommand(group) {
  return [...mpirunArgs(group), OMPI_COLL, ...ompiArgsFor(group)];
}

/**
 * One invocation of our runner for a group: per point the row of results.json (algorithm, size, time,
 * busbw, per-rank averages) and per rank the peak RSS.
 */
export async function runOurs(group, dir, tag, timeoutSec, side = OURS) {
  const jobFile = path.join(dir, "jobs", `${group.id}.json`);
  mkdirSync(path.dirname(jobFile), { recursive: true });
  writeFileSync(jobFile, JSON.stringify(jobFor(group, Math.max(60, timeoutSec)), null, 2));
  const outDir = path.join(dir, "runs", `${group.id}-${tag}-ours`);
  const [program, ...args] = oursCommand(group, jobFile, outDir, side);
  const p = await runProcess(program, args, { timeoutMs: timeoutSec * 1000 });
  if (p.code !== 0) {
    return { error: `${side.launcher === "mpirun" ? "mpirun" : "runner launch"} exited ${p.timedOut ? "(timed out) " : ""}${p.code}: ${firstLine(p.stderr) || firstLine(p.stdout)}`, ms: p.ms };
  }
  const runs = readdirSync(outDir);
  const doc = JSON.parse(readFileSync(path.join(outDir, runs[0], "results.json"), "utf8"));
  const points = group.points.map((pt, i) => {
    const row = doc.results.find((r) => r.stage === `p${i}`);
    if (!row) throw new Error(`${group.id}: results.json has no row for stage p${i}`);
    if (row.size !== pt.bytes) throw new Error(`${group.id}: ${pt.op} size ${row.size} in results.json, expected ${pt.bytes}`);
    return { algorithm: row.algorithm, size: row.size, time: row.time, busbw_reported: row.busbw, per_rank_avg_us: row.per_rank_avg_us };
  });
  const cores = doc.core_round_trip_ns ? { core_round_trip_ns: doc.core_round_trip_ns } : {};
  return { ms: p.ms, run_dir: path.join(outDir, runs[0]), max_rss_kib: doc.ranks.map((r) => r.max_rss_kib), ...cores, points };
}

/** One mpirun of the Open MPI baseline for a group. */
export async function runOmpi(group, timeoutSec) {
  const [program, ...args] = ompiCommand(group);
  const p = await runProcess(program, args, { timeoutMs: timeoutSec * 1000 });
  const doc = p.code === 0 ? lastJson(p.stdout) : null;
  if (!doc) return { error: `mpirun exited ${p.timedOut ? "(timed out) " : ""}${p.code}: ${firstLine(p.stderr) || firstLine(p.stdout)}`, ms: p.ms };
  const points = group.points.map((pt, i) => {
    const r = doc.results[i];
    if (r?.op !== pt.op || r.count !== pt.count) throw new Error(`${group.id}: ompi_coll answered ${JSON.stringify(r)} for ${pt.op}:${pt.count}`);
    return { algorithm: "ompi", size: pt.bytes, time: r.time, per_rank_avg_us: r.per_rank_avg_us };
  });
  return { ms: p.ms, max_rss_kib: doc.max_rss_kib, points };
}

/**
 * Aggregate copy bandwidth (bytes/s) of k concurrent processes (memcpy_bw.c: memcpy or non-temporal stores, the
 * faster): every repeat and the median.
 */
export async function memcpyBandwidth(bytes, k, repeats) {
  const p = await runProcess(MEMCPY_BW, [String(bytes), String(k), String(repeats)], { timeoutMs: 300_000 });
  const doc = p.code === 0 ? lastJson(p.stdout) : null;
  if (!doc) throw new Error(`memcpy_bw ${bytes} ${k} ${repeats} failed (${p.code}): ${firstLine(p.stderr)}`);
  return doc;
}

function run(cmd, args) {
  const r = spawnSync(cmd, args, { encoding: "utf8" });
  return r.error || r.status !== 0 ? null : r.stdout.trim();
}

/** The last-level cache's bytes (the highest cache level cpu0 has), or null where sysfs does not say. */
function lastLevelCache() {
  const dir = "/sys/devices/system/cpu/cpu0/cache";
  let best = null;
  try {
    for (const index of readdirSync(dir).filter((d) => d.startsWith("index"))) {
      const read = (f) => readFileSync(path.join(dir, index, f), "utf8").trim();
      if (read("type") === "Instruction") continue;
      const m = read("size").match(/^(\d+)([KMG]?)$/);
      if (!m) continue;
      const bytes = Number(m[1]) * { "": 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3 }[m[2]];
      const level = Number(read("level"));
      if (!best || level > best.level) best = { level, bytes };
    }
  } catch {}
  return best?.bytes ?? null;
}

/**
 * The machine's CPU ticks so far (/proc/stat's first line: every state summed) and how many of them the
 * hypervisor gave to other guests (steal); null where /proc/stat does not say.
 */
export function cpuTicks() {
  try {
    const f = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1, 9).map(Number);
    return f.length === 8 && f.every(Number.isFinite) ? { total: f.reduce((a, b) => a + b, 0), steal: f[7] } : null;
  } catch {
    return null;
  }
}

/** The share of the CPU time between two cpuTicks() the hypervisor stole; null where unknown. */
export const stealShare = (a, b) => (a && b && b.total > a.total ? (b.steal - a.steal) / (b.total - a.total) : null);

/** What the numbers ran on. */
export function machineInfo() {
  const lscpu = run("lscpu", []) ?? "";
  const field = (name) => lscpu.match(new RegExp(`^${name}:\\s*(.+)$`, "m"))?.[1]?.trim() ?? null;
  let osName = null;
  try {
    osName = readFileSync("/etc/os-release", "utf8").match(/^PRETTY_NAME="?([^"\n]+)"?/m)?.[1] ?? null;
  } catch {}
  return {
    cpu_model: field("Model name") ?? os.cpus()[0]?.model ?? null,
    cores: os.availableParallelism(),
    threads_per_core: Number(field("Thread\\(s\\) per core")) || null,
    memory_gib: Number((os.totalmem() / 2 ** 30).toFixed(1)),
    last_level_cache_bytes: lastLevelCache(),
    os: osName,
    kernel: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    open_mpi: (run("ompi_info", ["--version"]) ?? "").split("\n")[0] || null,
    mpicc: (run("mpicc", ["--version"]) ?? "").split("\n")[0] || null,
    hostname: os.hostname(),
    load_average_at_start: os.loadavg().map((v) => Number(v.toFixed(2))),
  };
}
