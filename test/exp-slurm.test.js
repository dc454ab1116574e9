// The slurm executor of `runner exp` against a real one-node SLURM cluster (scripts/slurm/local-cluster.sh):
// pack (one batch job for the shape, every repetition inside it), array (one array task per point, throttled,
// serialized), measuring alone (exclusive, chained; Ctrl-C leaves repetitions pending, no two overlap), and a
// job killed from outside whose trap marks the repetition it interrupts failed. Needs root, slurm-wlm and
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

const twoVariants = { a: {}, b: { env: { SPMD_EXP_VARIANT: "b" } } };

function campaign(name, executor, { job = tiny, repetitions = 1, worlds = [2], variant = twoVariants } = {}) {
  writeFileSync(path.join(dir, `${name}.job.json`), JSON.stringify(job));
  const file = path.join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify({ name, jobs: [`${name}.job.json`], matrix: { backend: ["shm"], world_size: worlds, variant }, repetitions, executor }));
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
  // Each repetition as it ends, then a final line (main said only "submitted SLURM job N").
  assert.equal((p.stderr.match(/^exp: \[[1-4]\/4\] \w+ job=tiny .* rep [12]: done$/gm) ?? []).length, 4, p.stderr);
  assert.match(p.stderr, /\nexp: every repetition done, in \S+\n$/);
  const s = await status(c);
  assert.deepEqual(s.counts.done, 2);
  assert.equal(outputs(c).length, 1, "one allocation for both points");
  const doc = JSON.parse(readFileSync(path.join(c.dir, "points", s.points[0].point_id, "rep-2", "results.json"), "utf8"));
  assert.equal(doc.world_size, 2);
  assert.ok(doc.manifest.env.SLURM_JOB_ID, "ran inside the allocation");
  assert.ok(doc.results.every((r) => r.wrong === 0));
});

test("slurm plan: a point asking more nodes than sinfo lists is refused, exit 2 naming it", { skip }, async () => {
  writeFileSync(path.join(dir, "big.job.json"), JSON.stringify(tiny));
  const file = path.join(dir, "big.json");
  writeFileSync(file, JSON.stringify({ name: "big", jobs: ["big.job.json"], matrix: { backend: ["shm"], world_size: [2], hosts: [1, 2] }, executor: { kind: "slurm" } }));
  const p = await exp(["plan", file]);
  assert.equal(p.code, 2, p.stderr);
  assert.match(p.stderr, /^runner: \S+big\.json: executor: 1 point cannot run: job=tiny backend=shm world_size=2 hosts=2 variant=base executor="slurm --exclusive" \(hosts 2, but the cluster has 1 node \(sinfo\)\)\n$/);
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

const slow = { name: "slow", iterations: 4, warmup: 0, tensors: {}, stages: [{ id: "work", op: "compute", us: 300_000 }] };

/** Runs the campaign until its first repetition has started (it has a log); returns the run and its job ids. */
async function startedRun(c) {
  const run = spawnRunner(["exp", "run", c.file, "--dir", c.dir], env);
  await run.seen(/submitted SLURM jobs? [\d, ]+\n/);
  const points = path.join(c.dir, "points");
  const started = () => readdirSync(points).some((id) => readdirSync(path.join(points, id)).some((r) => existsSync(path.join(points, id, r, "log.txt"))));
  for (let i = 0; i < 300 && !started(); i++) await new Promise((r) => setTimeout(r, 100));
  assert.ok(started(), "a batch job started");
  return run;
}

const noJobsLeft = () => assert.equal(spawnSync("squeue", ["--noheader"], { env, encoding: "utf8" }).stdout.trim(), "", "no job left");

test("slurm measures alone: exclusive jobs, chained across shapes; Ctrl-C leaves the repetitions pending, a resume finishes them, and no two repetitions ran at once", { skip }, async () => {
  const c = campaign("alone", { kind: "slurm", mode: "pack" }, { job: slow, repetitions: 2, worlds: [1, 2], variant: { a: {} } });
  const dry = await exp(["run", c.file, "--dir", c.dir, "--dry-run"]);
  assert.equal((dry.stdout.match(/^#SBATCH --exclusive$/gm) ?? []).length, 2, "a batch job per shape, each exclusive");
  const run = await startedRun(c);
  run.child.kill("SIGINT");
  const ended = await run.exited;
  assert.equal(ended.code, 130, ended.stderr);
  let s = await status(c);
  assert.deepEqual([s.counts.failed, s.counts.done, s.counts.pending], [0, 0, 2], JSON.stringify(s.points));
  noJobsLeft();
  const resumed = await exp(["run", c.file, "--dir", c.dir]);
  assert.equal(resumed.code, 0, resumed.stderr);
  s = await status(c);
  assert.deepEqual([s.counts.done, s.points.map((p) => p.attempts)], [2, [4, 4]], "both repetitions of each point: submitted twice");
  // Every repetition's start-end interval, in start order: each starts after the one before has ended.
  const intervals = s.points.flatMap((p) => [1, 2].map((rep) => JSON.parse(readFileSync(path.join(c.dir, "points", p.point_id, `rep-${rep}`, "marker.json"), "utf8"))))
    .map((m) => [Date.parse(m.started), Date.parse(m.ended)]).sort((x, y) => x[0] - y[0]);
  for (let i = 1; i < intervals.length; i++) assert.ok(intervals[i][0] >= intervals[i - 1][1], `repetition ${i} started before ${i - 1} ended: ${JSON.stringify(intervals)}`);
});

test("slurm: a job killed by someone else's scancel (as a time limit would) marks the repetition it interrupts failed, never done", { skip }, async () => {
  const c = campaign("killed", { kind: "slurm" }, { job: slow, variant: { a: {} } });
  const run = await startedRun(c);
  const jobs = spawnSync("squeue", ["--noheader", "--format=%i"], { env, encoding: "utf8" }).stdout.trim().split("\n").filter(Boolean);
  spawnSync("scancel", jobs, { env });
  const ended = await run.exited;
  assert.equal(ended.code, 1, ended.stderr);
  const s = await status(c);
  const failed = s.points.filter((pt) => pt.state === "failed");
  assert.equal(failed.length, 1, JSON.stringify(s.points));
  assert.equal(failed[0].exit_code, 143, "SIGTERM, from the trap");
  assert.equal(s.counts.done, 0);
  noJobsLeft();
});
