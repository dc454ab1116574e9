// Starts W ranks of `node runner ...` as separate processes with torchrun-style variables, the way a
// user would in W shells, and collects their exit codes and output.
import { spawn } from "node:child_process";
import { readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { freePort as launcherFreePort } from "../../dist/launch/ports.js";

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const RUNNER = path.join(REPO, "runner");

// The launcher's variables win over MPI's in discovery; a test started from such a shell must not leak them.
const NOT_MPI = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SPMD_MPI_THREAD_LEVEL"];

/** This process's environment without the variables that would override an MPI launcher's. */
export function envForMpi() {
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !NOT_MPI.includes(name)));
}

/** A port on 127.0.0.1 free now, below the kernel's ephemeral range as `runner launch` takes rank 0's (launcher.ts says why). */
export function freePort() {
  return launcherFreePort("127.0.0.1");
}

/** Runs `node runner <args>` once, with extra environment; resolves with code, stdout, stderr. */
export function runNode(args, env = {}, timeoutMs = 120_000) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { cwd: REPO, env: { ...process.env, ...env } });
    let stdout = "", stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, pid: child.pid });
    });
  });
}

/** Shared-memory segments that processes `pids` created and left behind (names carry the creator's pid). */
export function shmLeftovers(pids) {
  return readdirSync("/dev/shm").filter((f) => pids.some((pid) => f.startsWith(`spmd-${pid}-`)));
}

/**
 * Starts `node runner <args>` and returns at once, for tests that act on a process while it runs:
 * `seen(pattern)` resolves once its stderr matches, `exited` with its code, signal and output. `wrap`
 * runs it under another program (taskset).
 */
export function spawnRunner(args, env = {}, { wrap = [] } = {}) {
  const [program, ...rest] = [...wrap, process.execPath, RUNNER, ...args];
  const child = spawn(program, rest, { cwd: REPO, env: { ...process.env, ...env } });
  let stdout = "", stderr = "";
  const watchers = [];
  child.stdout.on("data", (d) => (stdout += d));
  child.stderr.on("data", (d) => {
    stderr += d;
    for (const w of watchers) if (w.pattern.test(stderr)) w.resolve();
  });
  const exited = new Promise((resolve) => child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr })));
  const seen = (pattern) =>
    new Promise((resolve, reject) => {
      if (pattern.test(stderr)) return resolve();
      watchers.push({ pattern, resolve });
      exited.then(() => reject(new Error(`exited before printing ${pattern}:\n${stderr}`)));
    });
  return { child, pid: child.pid, seen, exited };
}

/** The torchrun-style variables of rank `rank` of `world` meeting at 127.0.0.1:`port`. */
export function rankEnv(rank, world, port) {
  return {
    RANK: String(rank),
    WORLD_SIZE: String(world),
    LOCAL_RANK: String(rank),
    LOCAL_WORLD_SIZE: String(world),
    MASTER_ADDR: "127.0.0.1",
    MASTER_PORT: String(port),
  };
}

/**
 * W ranks of `node runner <args>`; resolves when all have exited. `env`: extra variables, or rank => them. The port
 * freePort found may still be taken before rank 0 listens on it (another test that drew the same port), which
 * rank 0 says and exits 1: then the ranks run again on another port, up to 3 times.
 */
export async function runRanks(world, args, { env = {}, timeoutMs } = {}) {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const ranks = await Promise.all(
      Array.from({ length: world }, (_, rank) =>
        runNode([RUNNER, ...args], { ...rankEnv(rank, world, port), ...(typeof env === "function" ? env(rank) : env) }, timeoutMs),
      ),
    );
    const left = shmLeftovers(ranks.map((r) => r.pid));
    if (left.length) throw new Error(`shared-memory segments left behind: ${left.join(", ")}`);
    const taken = ranks[0].code !== 0 && ranks[0].stderr.includes(`cannot listen on 127.0.0.1:${port}: address in use`);
    if (!taken || attempt === 3) return ranks;
  }
}
