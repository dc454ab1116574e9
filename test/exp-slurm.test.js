// The slurm executor of `runner exp` against a real one-node SLURM cluster (scripts/slurm/local-cluster.sh):
// pack (one batch job for the shape, every repetition inside it), array (one array task per point, throttled,
// serialized), and a cancelled job whose trap marks the repetition it interrupts. Needs root, slurm-wlm and
// munge; skipped with the reason otherwise, except in CI.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { REPO, RUNNER, runNode, spawnRunner } from "./helpers/ranks.js";

const CLUSTER = path.join(REPO, "scripts/slurm/local-cluster.sh");
const missing = process.getuid?.() !== 0 ? "needs root (slurmd runs jobs as their users)"
  : ["sbatch", "slurmctld", "slurmd", "munged"].some((t) => spawnSync("sh", ["-c", `command -v ${t}`]).status !== 0) ? "slurm-wlm or munge not installed" : undefined;
const skip = missing && !process.env.CI ? missing : false;

const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-exp-slurm-"));
let env;

before(() => {
  if (skip) return;
  if (missing) assert.fail(`CI must run the SLURM tests: ${missing}`);
  const p = spawnSync("bash", [CLUSTER, "start", path.join(dir, "cluster")], { encoding: "utf8", timeout: 60_000 });
  assert.equal(p.status, 0, `local cluster did not start:\n${p.stdout}\n${p.stderr}`);
  // The test's own launcher variables must not reach the jobs: discovery would read them before SLURM's.
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(RANK|WORLD_SIZE|LOCAL_|MASTER_|OMPI_|PMI|SLURM_)/.test(k)));
  env = { ...base, SLURM_CONF: path.join(dir, "cluster/slurm.conf") };
});

after(() => {
  if (!skip) spawnSync("bash", [CLUSTER, "stop", path.join(dir, "cluster")], { stdio: "inherit" });
  rmSync(dir, { recursive: true, force: true });
});

const tiny = { name: "tiny", iterations: 3, warmup: 1, check: true, tensors: { t: { dtype: "float32", count: 4096 } }, stages: [{ id: "ar", op: "allreduce", input: "t" }], sweep: { count: [256, 4096] } };

function campaign(name, executor, { job = tiny, repetitions = 1 } = {}) {
  writeFileSync(path.join(dir, `${name}.job.json`), JSON.stringify(job));
  const file = path.join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify({ name, jobs: [`${name}.job.json`], matrix: { backend: ["shm"], world_size: [2], variant: { a: {}, b: { env: { SPMD_EXP_VARIANT: "b" } } } }, repetitions, executor }));
  return { file, dir: path.join(dir, name) };
}

const exp = (args) => runNode([RUNNER, "exp", ...args], env, 300_000);
const status = async (c) => JSON.parse((await exp(["status", "--dir", c.dir, "--json"])).stdout);
const outputs = (c) => readdirSync(path.join(c.dir, "slurm")).filter((f) => f.endsWith(".out"));

test("slurm pack: one batch job for the shape runs every repetition, interleaved; --dry-run prints it and submits nothing", { skip }, async () => {
  const c = campaign("pack", { kind: "slurm", mode: "pack" }, { repetitions: 2 });
  const dry = await exp(["run", c.file, "--dir", c.dir, "--dry-run"]);
  assert.equal(dry.code, 0, dry.stderr);
  assert.match(dry.stdout, /^#SBATCH --nodes=1\n#SBATCH --ntasks=2\n/m);
  const reps = [...dry.stdout.matchAll(/^rep '[^']*points\/(\w+)\/rep-(\d)'/gm)].map((m) => `${m[1]}/${m[2]}`);
  assert.equal(reps.length, 4);
  assert.deepEqual(reps.map((r) => r.split("/")[1]), ["1", "1", "2", "2"], "interleaved: both points, then both again");
  const p = await exp(["run", c.file, "--dir", c.dir]);
  assert.equal(p.code, 0, p.stderr);
  assert.match(p.stderr, /submitted SLURM job \d+\n/);
  const s = await status(c);
  assert.deepEqual(s.counts.done, 2);
  assert.equal(outputs(c).length, 1, "one allocation for both points");
  const doc = JSON.parse(readFileSync(path.join(c.dir, "points", s.points[0].point_id, "rep-2", "results.json"), "utf8"));
  assert.equal(doc.world_size, 2);
  assert.ok(doc.manifest.env.SLURM_JOB_ID, "ran inside the allocation");
  assert.ok(doc.results.every((r) => r.wrong === 0));
});

test("slurm array: one array task per point, throttled to one at a time", { skip }, async () => {
  const c = campaign("array", { kind: "slurm", mode: "array", throttle: 1, serialize: true });
  const p = await exp(["run", c.file, "--dir", c.dir]);
  assert.equal(p.code, 0, p.stderr);
  assert.match(readFileSync(path.join(c.dir, "slurm", "exp-array-1n2t.sbatch"), "utf8"), /^#SBATCH --array=0-1%1$/m);
  assert.deepEqual((await status(c)).counts.done, 2);
  assert.equal(outputs(c).length, 2, "an output file per array task");
  const tasks = (await status(c)).points.map((pt) => JSON.parse(readFileSync(path.join(c.dir, "points", pt.point_id, "rep-1", "results.json"), "utf8")).manifest.env.SLURM_ARRAY_TASK_ID);
  assert.deepEqual(tasks.sort(), ["0", "1"]);
});

test("slurm: a cancelled job's trap marks the repetition it interrupts failed (never done)", { skip }, async () => {
  const slow = { name: "slow", iterations: 8, warmup: 0, tensors: {}, stages: [{ id: "work", op: "compute", us: 500_000 }] };
  const c = campaign("cancel", { kind: "slurm" }, { job: slow });
  const run = spawnRunner(["exp", "run", c.file, "--dir", c.dir], env);
  await run.seen(/submitted SLURM job/);
  // The batch job has started its first repetition once that has a log.
  const points = path.join(c.dir, "points");
  const started = () => readdirSync(points).some((id) => existsSync(path.join(points, id, "rep-1", "log.txt")));
  for (let i = 0; i < 300 && !started(); i++) await new Promise((r) => setTimeout(r, 100));
  assert.ok(started(), "the batch job started");
  run.child.kill("SIGINT");
  const ended = await run.exited;
  assert.equal(ended.code, 130, ended.stderr);
  const s = await status(c);
  const failed = s.points.filter((pt) => pt.state === "failed");
  assert.equal(failed.length, 1, JSON.stringify(s.points));
  assert.equal(failed[0].exit_code, 143, "SIGTERM, from the trap");
  assert.equal(s.counts.done, 0);
  assert.equal(spawnSync("squeue", ["--noheader"], { env, encoding: "utf8" }).stdout.trim(), "", "no job left");
});
