// Running `node runner` under a real `mpirun` for the MPI suites: whether this machine can at all (tests
// are skipped with the reason, except in CI, where that is a failure), and the launch itself.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { test } from "node:test";
import { envForMpi, REPO, RUNNER } from "./ranks.js";

function unavailable() {
  if (spawnSync("mpirun", ["--version"], { stdio: "ignore" }).error) return "mpirun not found (install Open MPI: openmpi-bin, libopenmpi-dev)";
  const info = spawnSync(process.execPath, [RUNNER, "info"], { cwd: REPO, encoding: "utf8" });
  if (!/\bmpi=built\b/.test(info.stdout)) return "the addon was built without MPI (CMake found no MPI; see `node runner info`)";
  return undefined;
}

export const mpiMissing = unavailable();
if (mpiMissing && !process.env.CI) console.log(`# MPI tests skipped: ${mpiMissing}`);

/** A test that needs mpirun and the MPI build: skipped without them, failed without them in CI; `opts` are node:test's (a skip of its own). */
export function mpiTest(name, fn, opts = {}) {
  test(name, { ...opts, skip: opts.skip || (mpiMissing && !process.env.CI ? mpiMissing : false) }, async () => {
    if (mpiMissing) assert.fail(`CI must run the MPI tests: ${mpiMissing}`);
    await fn();
  });
}

/**
 * `mpirun -np W node runner <args>`; resolves with the launcher's code and the ranks' merged output.
 * `onStarted(child, stderr)` runs once mpirun is spawned (a fault test then acts on the ranks); `wrap`
 * runs mpirun under another program (taskset), whose binding its ranks inherit.
 */
export function mpirun(W, args, opts = {}) {
  return mpmd([{ np: W, args }], opts);
}

/** Several programs in one MPI job: `mpirun -np n1 node runner <args1> : -np n2 node runner <args2> ...`. */
export function mpmd(apps, { env = {}, timeoutMs = 300_000, onStarted, wrap = [] } = {}) {
  const childEnv = { ...envForMpi(), ...env };
  const appArgs = apps.flatMap(({ np, args }, i) => [...(i ? [":"] : []), "-np", String(np), process.execPath, RUNNER, ...args]);
  return new Promise((resolve) => {
    const started = Date.now();
    const [program, ...args] = [...wrap, "mpirun", "--allow-run-as-root", "--oversubscribe", ...appArgs];
    const child = spawn(program, args, { cwd: REPO, env: childEnv });
    let stdout = "", stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: Date.now() - started, pid: child.pid });
    });
    onStarted?.(child, () => stderr);
  });
}
