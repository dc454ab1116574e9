// SLURM for real: a one-node cluster (scripts/slurm/local-cluster.sh: munged, slurmctld, slurmd) and the
// sbatch examples of scripts/slurm run as batch jobs, each checked through its output file: the table with
// 0 wrong, and exit code 0 (sbatch --wait returns the job's). The multi-node example runs on the one node
// (--nodes=1), and without that sbatch refuses it at once; `srun node runner doctor` runs as a --wrap job; mpirun.sbatch
// as root runs only when OMPI_ALLOW_RUN_AS_ROOT=1 opts in. Output files are named spmd-<script>-<job id>.out and
// ignored by git. Needs root, slurm-wlm and munge (and mpirun
// for the MPI examples); skipped with the reason otherwise, except in CI (CI set), where that is a failure.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { REPO, RUNNER } from "./helpers/ranks.js";

const CLUSTER = path.join(REPO, "scripts/slurm/local-cluster.sh");

function unavailable() {
  if (process.getuid?.() !== 0) return "needs root (slurmd runs jobs as their users)";
  const missingTools = ["sbatch", "slurmctld", "slurmd", "munged"].filter((t) => spawnSync("sh", ["-c", `command -v ${t}`]).status !== 0);
  if (missingTools.length) return `${missingTools.join(", ")} not found (install slurm-wlm and munge)`;
  return undefined;
}

const missing = unavailable();
if (missing && !process.env.CI) console.log(`# slurm.test.js skipped: ${missing}`);
const mpiBuilt = /\bmpi=built\b/.test(spawnSync(process.execPath, [RUNNER, "info"], { cwd: REPO, encoding: "utf8" }).stdout);

const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-slurm-"));
let env;
// The batch jobs, all submitted at once: sbatch --wait polls the job's state at growing intervals, so
// waiting for them one after another would mostly wait for the polls.
const jobs = {};

before(() => {
  if (missing) return;
  const p = spawnSync("bash", [CLUSTER, "start", path.join(dir, "cluster")], { encoding: "utf8", timeout: 60_000 });
  assert.equal(p.status, 0, `local cluster did not start:\n${p.stdout}\n${p.stderr}`);
  // The test's own launcher variables must not reach the jobs: discovery would read them before SLURM's.
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(RANK|WORLD_SIZE|LOCAL_|MASTER_|OMPI_|PMI|SLURM_)/.test(k)));
  env = { ...base, SLURM_CONF: path.join(dir, "cluster/slurm.conf") };
  // Where the script puts its output by itself: in the checkout it runs from.
  jobs["one-node"] = sbatch("one-node", [], undefined, { ownOutput: true });
  jobs["multi-node"] = sbatch("multi-node", ["--nodes=1", "--ntasks-per-node=4"]);
  jobs["multi-node on one node"] = sbatch("multi-node-2", [], ["scripts/slurm/multi-node.sbatch", "jobs/quickstart.json"]);
  jobs.doctor = sbatch("doctor", ["--ntasks=3"], [`--wrap=srun node runner doctor --size 1Mi --iterations 3 --out ${path.join(dir, "runs")}`]);
  if (mpiBuilt) {
    jobs.mpirun = sbatch("mpirun", [], undefined, { env: { OMPI_ALLOW_RUN_AS_ROOT: "1" } });
    jobs["mpirun as root"] = sbatch("mpirun-root", [], ["scripts/slurm/mpirun.sbatch", "jobs/quickstart.json"]);
    jobs["srun-pmix"] = sbatch("srun-pmix");
  }
});

after(() => {
  if (!missing) spawnSync("bash", [CLUSTER, "stop", path.join(dir, "cluster")], { stdio: "inherit" });
  rmSync(dir, { recursive: true, force: true });
});

/**
 * `sbatch --wait` of an example script running the quick start (or of `what`: a script and its arguments,
 * or --wrap), with `extra.env` added; resolves with its exit code, stderr, the job's output file and its
 * path (the script's own choice, in the checkout, with `extra.ownOutput`).
 */
function sbatch(script, sbatchArgs = [], what = [path.join("scripts/slurm", `${script}.sbatch`), "jobs/quickstart.json", "--iterations", "3", "--out", path.join(dir, "runs")], extra = {}) {
  const chosen = path.join(dir, `${script}.out`);
  const args = [...sbatchArgs, "--wait", ...(extra.ownOutput ? [] : [`--output=${chosen}`]), `--chdir=${REPO}`, ...what];
  return new Promise((resolve) => {
    const child = spawn("sbatch", args, { cwd: REPO, env: { ...env, ...extra.env } });
    let stdout = "", stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), 300_000);
    child.on("close", (code) => {
      clearTimeout(timer);
      const id = stdout.match(/Submitted batch job (\d+)/)?.[1];
      const file = extra.ownOutput ? path.join(REPO, `spmd-${script}-${id}.out`) : chosen;
      let output = "";
      try {
        output = readFileSync(file, "utf8");
      } catch {}
      resolve({ code, stderr, output, file });
    });
  });
}

function slurmTest(name, fn, { needsMpi = false } = {}) {
  const reason = missing ?? (needsMpi && !mpiBuilt ? "the addon was built without MPI" : undefined);
  test(name, { skip: reason && !process.env.CI ? reason : false }, async () => {
    if (reason) assert.fail(`CI must run the SLURM tests: ${reason}`);
    await fn();
  });
}

/** The job's output: exit 0, the table's rows all with 0 wrong, and `backend`. */
function assertClean({ code, stderr, output }, backend) {
  assert.equal(code, 0, `sbatch exited ${code}: ${stderr}\n${output}`);
  assert.match(output, new RegExp(`job quickstart, 4 ranks, backend ${backend}\\n`));
  assert.match(output, /# Out of bounds values : 0 OK/);
  const lines = output.split("\n");
  const column = lines.find((l) => /^# stage\s/.test(l)).slice(1).trim().split(/\s+/).indexOf("#wrong");
  const rows = lines.filter((l) => /^ {2}\S/.test(l));
  assert.equal(rows.length, 12, `expected the quick start's 12 rows:\n${output}`);
  for (const row of rows) assert.match(row.trim().split(/\s+/)[column], /^(0|N\/A)$/, `a row with wrong elements: ${row}`);
}

slurmTest("sbatch scripts/slurm/one-node.sbatch: srun starts 4 ranks from SLURM_* (derived port), shm, 0 wrong", async () => {
  const job = await jobs["one-node"];
  try {
    assertClean(job, "shm");
    assert.match(path.basename(job.file), /^spmd-one-node-\d+\.out$/, "one spmd- prefix");
    assert.equal(spawnSync("git", ["check-ignore", "-q", job.file], { cwd: REPO }).status, 0, `${job.file} is not ignored by git`);
  } finally {
    rmSync(job.file, { force: true });
  }
});

slurmTest("srun node runner doctor: 3 ranks from SLURM_*, the host's bandwidth between two of them, no outliers", async () => {
  const { code, stderr, output } = await jobs.doctor;
  assert.equal(code, 0, `sbatch exited ${code}: ${stderr}\n${output}`);
  assert.match(output, /Bandwidth \(GB\/s.*\n.*\n\S+\s+\d+\.\d{3}\n/);
  assert.match(output, /no outliers \(threshold 0\.5\)/);
});

slurmTest("sbatch scripts/slurm/multi-node.sbatch (on this one node): 0 wrong", async () => {
  assertClean(await jobs["multi-node"], "shm");
});

slurmTest("sbatch scripts/slurm/multi-node.sbatch on a one-node cluster: refused at once in one line, not left pending", async () => {
  const { code, stderr } = await jobs["multi-node on one node"];
  assert.notEqual(code, 0);
  assert.match(stderr, /^sbatch: error: Batch job submission failed: Node count specification invalid\n$/);
});

slurmTest("sbatch scripts/slurm/mpirun.sbatch: mpirun inside the allocation, MPI backend, 0 wrong (as root: OMPI_ALLOW_RUN_AS_ROOT=1 opts in)", async () => {
  assertClean(await jobs.mpirun, "mpi");
}, { needsMpi: true });

slurmTest("sbatch scripts/slurm/mpirun.sbatch as root without opting in: one line saying how, non-zero exit", async () => {
  const { code, output } = await jobs["mpirun as root"];
  assert.notEqual(code, 0);
  assert.equal(output, "mpirun.sbatch: running as root, which Open MPI refuses; to allow it, submit with OMPI_ALLOW_RUN_AS_ROOT=1 sbatch ...\n");
}, { needsMpi: true });

slurmTest("sbatch scripts/slurm/srun-pmix.sbatch: srun --mpi=pmix with the MPI backend, 0 wrong", async () => {
  assertClean(await jobs["srun-pmix"], "mpi");
}, { needsMpi: true });
