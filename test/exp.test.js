// Experiment campaigns (`runner exp`): plan, run with a failing point and --fail-fast, resume, status, query,
// report (drawn in headless Chromium), compare, stale points after a job edit, SIGINT during a run, bad files.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { cannotStart } from "../dist/exp/executors.js";
import { assertRenders, CHROMIUM } from "./helpers/chromium.js";
import { findProcesses, survivors } from "./helpers/procs.js";
import { envForMpi, REPO, RUNNER, runNode, spawnRunner } from "./helpers/ranks.js";
import { withTempDir } from "./helpers/tmp.js";

const exp = (args, timeoutMs = 300_000) => runNode([RUNNER, "exp", ...args], {}, timeoutMs);

const tinyJob = {
  name: "tiny", iterations: 3, warmup: 1, check: true,
  tensors: { t: { dtype: "float32", count: 4096 } },
  stages: [{ id: "ar", op: "allreduce", input: "t" }],
  sweep: { count: [256, 4096] },
};

/** Writes job.json and exp.jsonc (the experiment, with a comment and a trailing comma: JSON with comments) into `dir`. */
function campaign(dir, experiment, job = tinyJob) {
  writeFileSync(path.join(dir, "job.json"), JSON.stringify(job));
  const file = path.join(dir, "exp.jsonc");
  const text = JSON.stringify({ name: "t", jobs: ["job.json"], ...experiment }, null, 2);
  writeFileSync(file, `// a test campaign\n${text.replace(/\n}$/, ",\n}")}\n`);
  return { file, dir: path.join(dir, "campaign") };
}

const pointIds = (stdout) => [...stdout.matchAll(/^([0-9a-f]{12}) /gm)].map((m) => m[1]);
const statusOf = async (c) => JSON.parse((await exp(["status", c.file, "--dir", c.dir, "--json"])).stdout);
const byVariant = (s, variant, w) => s.points.find((p) => p.params.variant === variant && p.params.world_size === w);

test("plan: one line per point with its id and parameters, the exclusions and counts; the same ids every time", async () => {
  await withTempDir("spmd-exp-plan-", async (tmp) => {
    const c = campaign(tmp, {
      matrix: { backend: ["shm"], world_size: [2, 3], variant: { a: {}, b: { env: { X: "1" } } } },
      exclude: [{ world_size: 3, variant: "b" }], repetitions: 2,
    });
    const p = await exp(["plan", c.file, "--dir", c.dir]);
    assert.equal(p.code, 0, p.stderr);
    assert.match(p.stdout, /^# t: 3 points, 1 excluded, 2 repetitions each \(6 runs, order interleaved, executor local\)/);
    assert.match(p.stdout, /# 3 points in .*: 3 pending/);
    assert.match(p.stdout, /\nexcluded: job=tiny backend=shm world_size=3 hosts=1 variant=b executor="local"\n/);
    const ids = pointIds(p.stdout);
    assert.equal(new Set(ids).size, 3);
    assert.deepEqual(pointIds((await exp(["plan", c.file, "--dir", c.dir])).stdout), ids, "ids are a function of the experiment");
    assert.match((await exp(["run", c.file, "--dir", c.dir, "--dry-run"])).stdout, /^X='1' \S+node /m, "env values quoted for sh");
    // The executor and what shapes its runs are part of every id, and the plan shows them.
    const underMpirun = async (executor) => {
      const e = campaign(tmp, { matrix: { backend: ["shm"], world_size: [2, 3], variant: { a: {}, b: { env: { X: "1" } } } }, exclude: [{ world_size: 3, variant: "b" }], repetitions: 2, executor });
      const q = await exp(["plan", e.file, "--dir", e.dir]);
      assert.equal(q.code, 0, q.stderr);
      return q.stdout;
    };
    const mpirun = await underMpirun({ kind: "mpirun", args: ["--bind-to", "core"] });
    assert.match(mpirun, /executor mpirun \(mpirun --bind-to core\)\)/);
    assert.match(mpirun, /variant=a executor="mpirun --bind-to core"\n/);
    const otherIds = pointIds(mpirun);
    assert.equal(otherIds.filter((id) => ids.includes(id)).length, 0, "another executor, other ids");
    assert.notDeepEqual(pointIds(await underMpirun({ kind: "mpirun", args: ["--bind-to", "none"] })), otherIds, "another mpirun option, other ids");

    // The order repetitions run in, as --dry-run prints them (nothing runs).
    let n = 0;
    const order = async (extra) => {
      const sub = path.join(tmp, `order-${n++}`);
      mkdirSync(sub);
      const o = campaign(sub, { matrix: { backend: ["shm"], world_size: [2, 3] }, repetitions: 2, ...extra });
      const p = await exp(["run", o.file, "--dir", o.dir, "--dry-run"]);
      assert.equal(p.code, 0, p.stderr);
      assert.ok(!existsSync(o.dir), "a dry run writes nothing");
      return [...p.stdout.matchAll(/ -n (\d) .*\/rep-(\d)\/results\.json/g)].map((m) => `W${m[1]}r${m[2]}`).join(" ");
    };
    assert.equal(await order({ order: "interleaved" }), "W2r1 W3r1 W2r2 W3r2");
    assert.equal(await order({ order: "blocked" }), "W2r1 W2r2 W3r1 W3r2");
    const shuffled = await Promise.all([1, 2, 3, 4, 5].map((seed) => order({ order: "randomized", seed })));
    assert.equal(await order({ order: "randomized", seed: 3 }), shuffled[2], "the same seed, the same order");
    assert.ok(new Set(shuffled).size > 1, "other seeds, other orders");
    assert.ok(shuffled.every((o) => o.split(" ").sort().join(" ") === "W2r1 W2r2 W3r1 W3r2"));
  });
});

test("bad experiment files: exit 2 before anything runs, one line naming the key or the point", async () => {
  await withTempDir("spmd-exp-bad-", async (tmp) => {
    const matrix = { backend: ["shm"], world_size: [2] };
    writeFileSync(path.join(tmp, "hosts.txt"), "# one host\nnodeA slots=4\n");
    const cases = [
      [{ matrix, repetition: 2 }, /exp\.jsonc: line \d+ column \d+: unknown key "repetition" \(did you mean "repetitions"\?\)/],
      [{ matrix: { ...matrix, world_size: [] } }, /matrix\.world_size: expected at least 1 item, got 0/],
      [{ matrix: { ...matrix, colour: ["red"] } }, /matrix: unknown key "colour"/],
      [{ matrix: { ...matrix, world_size: [2, 3] }, zip: [["backend", "world_size"]] }, /zip\[0\]: zipped axes need as many values each: backend has 1, world_size 2/],
      [{ matrix, exclude: [{ backend: "tcp" }] }, /exclude\[0\]: matches no point/],
      [{ matrix: { ...matrix, variant: { a: { env: { "A=B": "1" } } } } }, /matrix\.variant\.a\.env.*: expected an environment variable name \(\[A-Za-z_\]\[A-Za-z0-9_\]\*\), got "A=B"/],
      [{ matrix, exclude: [{ world_size: 2 }] }, /every point is excluded/],
      [{ matrix: { ...matrix, hosts: [2] } }, /executor: 1 point cannot run: job=tiny backend=shm world_size=2 hosts=2 variant=base executor="local" \(the local executor starts every rank on this host/],
      [{ matrix: { backend: ["mpi", "shm"], world_size: [2, 3] } }, /executor: 2 points cannot run: job=tiny backend=mpi world_size=2 .*\(backend mpi needs ranks started by an MPI launcher.*\); job=tiny backend=mpi world_size=3 /],
      [{ matrix: { ...matrix, hosts: [2] }, executor: { kind: "mpirun", hostfile: "hosts.txt" } }, /executor: 1 point cannot run: .* hosts=2 .*\(hosts 2, but the hostfile names 1\)/],
    ];
    for (const [experiment, expected] of cases) {
      const c = campaign(tmp, experiment);
      const p = await exp(["plan", c.file, "--dir", c.dir]);
      assert.equal(p.code, 2, `${JSON.stringify(experiment)}: ${p.stderr}`);
      assert.match(p.stderr, expected);
      assert.equal(p.stderr.trim().split("\n").length, 1, p.stderr);
    }
    // A job that would not validate at the point's world size: a root that only exists at W = 3.
    const rooted = { ...tinyJob, stages: [{ id: "b", op: "broadcast", input: "t", root: 2 }] };
    const c = campaign(tmp, { matrix: { backend: ["shm"], world_size: [3, 2] } }, rooted);
    const p = await exp(["run", c.file, "--dir", c.dir]);
    assert.equal(p.code, 2, p.stderr);
    assert.match(p.stderr, /^runner: .*exp\.jsonc: point job=tiny backend=shm world_size=2 hosts=1 variant=base executor="local": .*root/);
    assert.ok(!existsSync(c.dir), "nothing ran");
    writeFileSync(c.file, '{ "name": "t", "jobs": ["job.json"] "matrix": {} }');
    assert.match((await exp(["plan", c.file])).stderr, /exp\.jsonc: line 1 column 37: invalid JSON: CommaExpected/);
  });
});

test("plan's hosts check: a point asking more hosts than the executor can give (the hostfile's, or the nodes sinfo lists) is named", () => {
  const point = { job: "j", backend: "shm", world_size: 4, hosts: 3, variant: "base", executor: "slurm" };
  const slurm = { kind: "slurm", mode: "pack", sbatch: [], concurrent: false };
  const nodes = (n) => ({ names: Array.from({ length: n }, (_, i) => `n${i}`), count: (k) => `partition debug has ${k} nodes (sinfo)` });
  assert.equal(cannotStart(slurm, point, nodes(2)), "hosts 3, but partition debug has 2 nodes (sinfo)");
  assert.equal(cannotStart(slurm, point, nodes(3)), undefined);
  assert.equal(cannotStart(slurm, point, undefined), undefined, "unknown hosts (no sinfo answer) are not refused");
  assert.equal(cannotStart({ kind: "local" }, { ...point, hosts: 1, backend: "mpi" }), "backend mpi needs ranks started by an MPI launcher: use the mpirun or slurm executor");
});

test("run: a failing point does not stop the others (--fail-fast does); status, query, report and compare", async (t) => {
  await withTempDir("spmd-exp-run-", async (tmp) => {
    const c = campaign(tmp, {
      matrix: { backend: ["shm"], world_size: [2, 3], variant: { base: {}, broken: { env: { NODE_OPTIONS: "--require=/nonexistent-spmd-module.js" } } } },
      exclude: [{ world_size: 3, variant: "broken" }], repetitions: 2,
    });
    // Interleaved: base W=2 runs, then broken W=2 fails and --fail-fast stops there.
    let p = await exp(["run", c.file, "--dir", c.dir, "--fail-fast"]);
    assert.equal(p.code, 1, p.stderr);
    let s = await statusOf(c);
    assert.deepEqual([byVariant(s, "base", 2).reps_done, byVariant(s, "broken", 2).state, byVariant(s, "base", 3).attempts], [1, "failed", 0]);

    p = await exp(["run", c.file, "--dir", c.dir]);
    assert.equal(p.code, 1, "a point failed");
    s = await statusOf(c);
    assert.deepEqual(s.counts, { pending: 0, running: 0, done: 2, failed: 1, stale: 0 });
    const broken = byVariant(s, "broken", 2);
    assert.equal(broken.exit_code, 1);
    assert.equal(broken.attempts, 3, "tried once under --fail-fast, then both repetitions");
    assert.match(broken.log_tail, /nonexistent-spmd-module/);
    assert.equal(byVariant(s, "base", 2).attempts, 2, "the repetition done before was not run again");
    const text = (await exp(["status", "--dir", c.dir])).stdout;
    assert.match(text, /: 2 done, 1 failed\n/);
    assert.match(text, /failed .* variant=broken executor="local" exit 1\n( {4}\| .*\n)*? {4}\| Error: Cannot find module .\/nonexistent-spmd-module/);

    // query: every row of every repetition, as the files have it.
    const rows = JSON.parse((await exp(["query", "SELECT r.*, p.world_size FROM rows r JOIN points p USING (point_id) ORDER BY p.world_size, rep, size", "--dir", c.dir, "--format", "json"])).stdout);
    assert.equal(rows.length, 2 * 2 * 2, "2 points x 2 repetitions x 2 sizes");
    for (const r of rows) {
      const doc = JSON.parse(readFileSync(path.join(c.dir, "points", r.point_id, `rep-${r.rep}`, "results.json"), "utf8"));
      const row = doc.results.find((x) => x.size === r.size);
      assert.deepEqual([r.stage, r.op, r.busbw, r.p50_us, r.wrong, r.algorithm], [row.stage, row.op, row.busbw, row.time.p50_us, row.wrong, row.algorithm]);
    }
    const csv = (await exp(["query", "SELECT state, count(*) AS n FROM points GROUP BY state ORDER BY state", "--dir", c.dir, "--format", "csv"])).stdout;
    assert.equal(csv, "state,n\ndone,2\nfailed,1\n");
    const env = JSON.parse((await exp(["query", "SELECT value FROM env JOIN points USING (point_id) WHERE key = 'NODE_OPTIONS'", "--dir", c.dir, "--format", "json"])).stdout);
    assert.deepEqual(env, [{ value: "--require=/nonexistent-spmd-module.js" }]);
    assert.equal((await exp(["query", "PRAGMA journal_mode", "--dir", c.dir, "--format", "csv"])).stdout, "journal_mode\ndelete\n", "not WAL: NFS and Lustre");
    const bad = await exp(["query", "DELETE FROM rows", "--dir", c.dir]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /^runner: exp query: .*read-only/);

    await t.test("report: a sortable table of every row and charts, drawn in headless Chromium", () => reportChecks(c, tmp));
    await t.test("compare: direction-aware; exit 1 on a regression beyond tolerance and noise", () => compareChecks(c, tmp));
  });
});

async function reportChecks(c, tmp) {
  const p = await exp(["report", c.file, "--dir", c.dir]);
  assert.equal(p.code, 0, p.stderr);
  const html = readFileSync(path.join(c.dir, "report.html"), "utf8");
  const table = html.split("<h2>Every row")[1];
  assert.match(table, /<table class="sortable"><thead><tr><th>point_id<\/th>/);
  assert.equal((table.match(/<tr>/g) ?? []).length, 1 + 8, "a heading and 8 rows");
  assert.ok((html.match(/<svg /g) ?? []).length >= 2, "busbw by size, and scaling over world sizes");
  assert.match(html, /<td>variant<\/td><td>base, broken<\/td>|<td>world_size<\/td><td>2, 3<\/td>/, "what differs between points");
  assert.doesNotMatch(html, /https?:\/\/(?!www\.w3\.org)/, "nothing fetched");
  assert.match(readFileSync(path.join(c.dir, "report.md"), "utf8"), /^# Campaign t\n/);
  assert.match(html, /<text[^>]*>16 KiB<\/text>/, "sizes in B/KiB/MiB on the size axis");
  assert.match(html, /<h2>Failed points<\/h2>\n<details open><summary>job=tiny backend=shm world_size=2 hosts=1 variant=broken executor=&quot;local&quot;: exit 1<\/summary><pre>[^]*nonexistent-spmd-module/);
  if (CHROMIUM || process.env.CI) assertRenders(path.join(c.dir, "report.html"), tmp, "1200,1600");
  // Per-launch variables are no difference between points; env values reach report.md as text, never HTML.
  const launched = path.join(tmp, "launched");
  cpSync(c.dir, launched, { recursive: true });
  for (const id of readdirSync(path.join(launched, "points"))) {
    const file = path.join(launched, "points", id, "rep-1", "results.json");
    if (!existsSync(file)) continue;
    const doc = JSON.parse(readFileSync(file, "utf8"));
    Object.assign(doc.manifest.env, { OMPI_MCA_orte_hnp_uri: `${id};tcp://10.0.0.1:4242`, SLURM_JOBID: id, NOTE: `<img src=x onerror=alert(1)> ${id}` });
    rewriteResults(path.dirname(file), doc);
  }
  assert.equal((await exp(["report", "--dir", launched])).code, 0);
  const differs = readFileSync(path.join(launched, "report.html"), "utf8").split("<h2>What differs")[1].split("<details>")[0];
  assert.match(differs, /env\.NOTE/);
  assert.doesNotMatch(differs, /OMPI_MCA_orte_hnp_uri|SLURM_JOBID/);
  const md = readFileSync(path.join(launched, "report.md"), "utf8");
  assert.match(md, /\\<img src=x onerror=alert\\\(1\\\)\\>/);
  assert.doesNotMatch(md, /(^|[^\\])<img/m, "no unescaped HTML");
}

/** A repetition's results replaced as if its run had left them: its marker's hash follows (campaign.ts, readMarker). */
function rewriteResults(rep, doc) {
  const text = JSON.stringify(doc);
  writeFileSync(path.join(rep, "results.json"), text);
  const marker = JSON.parse(readFileSync(path.join(rep, "marker.json"), "utf8"));
  writeFileSync(path.join(rep, "marker.json"), JSON.stringify({ ...marker, results_sha256: createHash("sha256").update(text).digest("hex") }));
}

/**
 * A copy of the campaign with 3 repetitions a point, each holding repetition 1's results (no spread) times
 * `factor(rep)`: as fast, or slower by that much.
 */
function copyWith(c, tmp, name, factor, edit = () => {}) {
  const to = path.join(tmp, name);
  cpSync(c.dir, to, { recursive: true });
  for (const id of readdirSync(path.join(to, "points"))) {
    const point = path.join(to, "points", id);
    const first = path.join(point, "rep-1", "results.json");
    if (!existsSync(first)) continue;
    const text = readFileSync(first, "utf8");
    for (const rep of [1, 2, 3]) {
      const doc = JSON.parse(text);
      for (const r of doc.results) {
        r.busbw *= factor(rep);
        r.algbw *= factor(rep);
        for (const k of Object.keys(r.time)) r.time[k] /= factor(rep);
      }
      edit(doc, rep);
      mkdirSync(path.join(point, `rep-${rep}`), { recursive: true });
      if (rep > 1) cpSync(path.join(point, "rep-1", "marker.json"), path.join(point, `rep-${rep}`, "marker.json"));
      rewriteResults(path.join(point, `rep-${rep}`), doc);
    }
    const record = JSON.parse(readFileSync(path.join(point, "point.json"), "utf8"));
    writeFileSync(path.join(point, "point.json"), JSON.stringify({ ...record, repetitions: 3 }));
  }
  return to;
}

// Launches whose start-up found the ranks' cores 6x farther apart (core_round_trip_ns) measured another machine: each
// row is judged on the launches of a machine both sides measured (metrics/verdict.ts, judgeAlike).
async function machineChecks(c, tmp) {
  const trips = (ns) => (doc, rep) => (doc.core_round_trip_ns = [ns(rep)]);

  const near = copyWith(c, tmp, "near", () => 1, trips(() => 50));
  // Every launch 5x slower on the far machine: no machine in common, so no verdict either way.
  const far = await exp(["compare", near, copyWith(c, tmp, "far", () => 0.2, trips(() => 320))]);
  assert.equal(far.code, 0, far.stdout);

  assert.match(far.stdout, /^MACHINE DIFFERED +busbw@fastest +tiny ar \(allreduce\) .* \(80\.0% worse\)$/m);
  assert.match(far.stdout, /^# MACHINES: .*: the baseline: 6 at 50 ns; the new campaign: 6 at 320 ns; each row is judged on the launches of a machine both sides measured/m);
  assert.match(far.stdout, /^# PASS: 0 regressions, 0 improvements, 0 missing, 1 failed \(0 within tolerance, 0 within noise, 8 machine differed; 8 comparisons/m);
  // One launch a side on the near machine, the rest far and 5x slow: as fast as before where alike, so no change ...
  const mixed = (speed) => copyWith(c, tmp, `mixed-${speed}`, (rep) => (rep === 1 ? speed : 0.2), trips((rep) => (rep === 1 ? 50 : 320)));
  const same = await exp(["compare", near, mixed(1)]);
  assert.equal(same.code, 0, same.stdout);
  assert.match(same.stdout, /^# PASS: 0 regressions/m);
  // ... and half as fast where alike is a regression: 3 launches against 1, every pair beyond twice the threshold.
  const half = await exp(["compare", near, mixed(0.5)]);
  assert.equal(half.code, 1, half.stdout);
  assert.match(half.stdout, /^# FAIL: 8 regressions/m);
  assert.match(half.stdout, /^REGRESSION +busbw@fastest +tiny ar .* \(judged on the repetitions of a machine both campaigns measured\)$/m);
  assert.match(half.stdout, /^# MACHINES: .*the new campaign: 2 at 50 ns, 4 at 320 ns/m);
  // Launches that timed no round trip (W=3 on 2 CPUs does not) leave the others' machines to be said.
  const w2only = copyWith(c, tmp, "w2-only", () => 1, (doc) => (doc.world_size === 2 ? (doc.core_round_trip_ns = [320]) : delete doc.core_round_trip_ns));
  assert.match((await exp(["compare", near, w2only])).stdout, /^# MACHINES: .*: the baseline: 6 at 50 ns; the new campaign: 3 at 320 ns; /m);
  const report = await exp(["report", "--dir", path.join(tmp, "far"), "--baseline", near]);
  assert.equal(report.code, 0, report.stdout + report.stderr);
  assert.match(readFileSync(path.join(tmp, "far", "report.md"), "utf8"), /\| machines \| +\| core round trips \|.*6 at 320 ns: rows judged on a machine both measured \|/);
}

async function compareChecks(c, tmp) {
  const same = await exp(["compare", c.dir, c.dir]);
  assert.equal(same.code, 0, same.stdout);
  // W=3 on a host with fewer cores is said once, with the point (this VM has 2; CI runners have 4).
  const crowded = /^# OVERSUBSCRIBED job=tiny backend=shm world_size=3 hosts=1 variant=base executor="local": 3 ranks on \d cores \(.+\): .*measure with ranks <= cores$/m;
  if (os.availableParallelism() < 3) assert.match(same.stdout, crowded);
  else assert.doesNotMatch(same.stdout, /OVERSUBSCRIBED/);
  assert.match(same.stdout, /^# too few repetitions: 2 and 2; the test across repetitions needs 3 a side/m);
  assert.match(same.stdout, /^# PASS: 0 regressions, 0 improvements, 0 missing, 1 failed \(8 within tolerance, 0 within noise; 8 comparisons, 2 and 2 repetitions\)$/m, "2 points x 2 sizes x 2 metrics");
  const base = copyWith(c, tmp, "base", () => 1);
  const slower = copyWith(c, tmp, "slower", () => 0.2);
  const worse = await exp(["compare", base, slower]);
  assert.equal(worse.code, 1, worse.stdout);
  assert.match(worse.stdout, /^REGRESSION +busbw@fastest +tiny ar \(allreduce\) size \d+ (B|KiB|MiB) W=\d shm\/base: .* \(80\.0% worse\) \(change across repetitions -80\.0%\.\.-80\.0%\)/m);
  assert.match(worse.stdout, /^REGRESSION +time\.min_us .* \(80\.0% worse\)/m, "a time 5x as long is worse: lower is better");
  assert.match(worse.stdout, /^# values: what each verdict is taken on, each side's median over its repetitions of a repetition's fastest iteration \(time\.min_us; .*the change is the ratio of the two values shown$/m, "says what the numbers are");
  assert.doesNotMatch(same.stdout, /^# values/m, "nothing shown, nothing to explain");
  assert.match(worse.stdout, /^# FAIL: 8 regressions, 0 improvements, 0 missing, 1 failed \(0 within tolerance, 0 within noise; 8 comparisons, 3 and 3 repetitions\)/m);
  const better = await exp(["compare", slower, base]);
  assert.equal(better.code, 0, better.stdout);
  assert.match(better.stdout, /# PASS: 0 regressions, 8 improvements/);
  // One repetition of three 5x slower decides nothing; two of three are 80% worse in the median, but one
  // repetition still as fast as before keeps it within noise.
  // Its start-up found another copy path: what the note says of it (metrics/verdict.ts, startupApart).
  const copyPath = (from) => `single-copy: cma (process_vm_readv/writev) from ${from}, broadcast from 4 MiB (timed 16-256 KiB at start-up)`;
  const oneSlowDir = copyWith(c, tmp, "one-slow", (rep) => (rep === 3 ? 0.2 : 1), (doc, rep) => (doc.copy_path = copyPath(rep === 3 ? "16 KiB" : "1 MiB")));
  const oneSlow = await exp(["compare", base, oneSlowDir]);
  assert.equal(oneSlow.code, 0, oneSlow.stdout);
  assert.match(oneSlow.stdout, /# PASS: 0 regressions, 0 improvements, 0 missing, 1 failed \(8 within tolerance/);
  // ... and is named, with its point: every row of it ran 5x the median.
  assert.match(oneSlow.stdout, /^# UNSTEADY new \S+one-slow job=tiny backend=shm world_size=\d hosts=1 variant=base executor="local": repetition 3 ran 5\.00x the median in 2 of 2 rows \(its start-up chose single copy from 16 KiB, broadcast from 4 MiB, the others' mostly single copy from 1 MiB, broadcast from 4 MiB\): the machine changed while they ran .*run more repetitions, spread in time$/m);
  assert.doesNotMatch(oneSlow.stdout, /UNSTEADY baseline/, "the baseline's repetitions agree");
  // The launches of the point, both sides together, took two paths: counted, with how to keep them one.
  assert.match(oneSlow.stdout, /^# COPY PATHS job=tiny backend=shm world_size=\d hosts=1 variant=base executor="local": the launches' start-ups chose .*\b1 single copy from 16 KiB, broadcast from 4 MiB\b.*: a near tie .*SPMD_SHM_SINGLE_COPY=fixed/m);
  // A results file whose copy_path is not a string (a stranger's) indexes and compares as one without it.
  const oddPath = await exp(["compare", base, copyWith(c, tmp, "odd-path", () => 1, (doc) => (doc.copy_path = { not: "a string" }))]);
  assert.equal(oddPath.code, 0, oddPath.stdout + oddPath.stderr);
  assert.doesNotMatch(worse.stdout, /UNSTEADY/, "every repetition 5x slower is a change, not a spell");
  assert.equal((await exp(["report", "--dir", oneSlowDir, "--baseline", base])).code, 0);
  assert.match(readFileSync(path.join(oneSlowDir, "report.html"), "utf8"), /<tr><td>unsteady<\/td><td><\/td><td>new \S+one-slow job=tiny [^<]*<\/td><td><\/td><td><\/td><td>repetition 3 ran 5\.00x the median in 2 of 2 rows \(its start-up chose single copy from 16 KiB[^<]*\): run more repetitions<\/td><\/tr>/);
  assert.match(readFileSync(path.join(oneSlowDir, "report.html"), "utf8"), /<tr><td>copy paths<\/td><td><\/td><td>job=tiny [^<]*<\/td><td><\/td><td><\/td><td>the launches chose [^<]*1 single copy from 16 KiB[^<]*: SPMD_SHM_SINGLE_COPY=fixed keeps them the same<\/td><\/tr>/);
  const twoSlow = await exp(["compare", base, copyWith(c, tmp, "two-slow", (rep) => (rep === 1 ? 1 : 0.2))]);
  assert.equal(twoSlow.code, 0, twoSlow.stdout);
  assert.equal((twoSlow.stdout.match(/^WITHIN NOISE .* \(80\.0% worse\)/gm) ?? []).length, 8, twoSlow.stdout);
  await machineChecks(c, tmp);
  // A point on one side only is named by its parameters, and fails the comparison.
  const fewer = copyWith(c, tmp, "fewer", () => 1);
  const gone = JSON.parse((await exp(["query", "SELECT point_id FROM points WHERE world_size = 3", "--dir", fewer, "--format", "json"])).stdout)[0].point_id;
  rmSync(path.join(fewer, "points", gone), { recursive: true });
  const missing = await exp(["compare", base, fewer]);
  assert.equal(missing.code, 1, missing.stdout);
  assert.match(missing.stdout, /^MISSING +only in the baseline: job=tiny backend=shm world_size=3 hosts=1 variant=base executor="local"$/m);
  assert.match(missing.stdout, /^# FAIL: 0 regressions, 0 improvements, 1 missing, 1 failed/m);
  // A folder compares on the metrics its experiment recorded (measures.json), as the experiment file would.
  writeFileSync(path.join(slower, "measures.json"), JSON.stringify({ metrics: { busbw: "higher" }, tolerance: {} }));
  assert.match((await exp(["compare", base, slower])).stdout, /# FAIL: 4 regressions, .* 4 comparisons/);
  // One experiment against its compare.baseline, with its metrics and tolerances: busbw alone here.
  const withBaseline = campaign(path.join(tmp, "base"), { matrix: { backend: ["shm"], world_size: [2] }, metrics: { busbw: "higher" }, compare: { baseline: ".", tolerance: { busbw: "90%" } } });
  const tolerated = await exp(["compare", withBaseline.file, "--dir", slower]);
  assert.equal(tolerated.code, 0, tolerated.stdout);
  assert.match(tolerated.stdout, /^# PASS: 0 regressions, 0 improvements, 0 missing, 1 failed \(4 within tolerance, 0 within noise; 4 comparisons/m, "80% worse is within a 90% tolerance");
  // The report against a baseline leads with the verdict and lists the changes, each in its metric's direction.
  assert.equal((await exp(["report", "--dir", slower, "--baseline", base])).code, 0);
  const html = readFileSync(path.join(slower, "report.html"), "utf8");
  assert.match(html, /<h1>Campaign slower<\/h1>\n<p class="headline regression">Against the baseline: FAIL: 4 regressions, 0 improvements, 0 missing, 1 failed/);
  assert.equal((html.match(/<tr><td>regression<\/td><td>busbw@fastest<\/td>/g) ?? []).length, 4);
  const crowdedRow = /<tr><td>oversubscribed<\/td><td><\/td><td>job=tiny backend=shm world_size=3 hosts=1 variant=base executor=&quot;local&quot;<\/td><td><\/td><td><\/td><td>3 ranks on \d cores \(.+\): measure with ranks &lt;= cores<\/td><\/tr>/;
  if (os.availableParallelism() < 3) assert.match(html, crowdedRow);
  else assert.doesNotMatch(html, /oversubscribed/);
}

test("SIGINT during a run stops its ranks and marks nothing; run again resumes without rerunning what was done; a job edit makes points stale", async () => {
  await withTempDir("spmd-exp-int-", async (tmp) => {
    const tag = `exp-int-${process.pid}`;
    // 2.4 s a repetition: the second `exp run` below must find the first still in its second point, on a busy machine too.
    const slowJob = { name: "slow", iterations: 6, warmup: 0, tensors: {}, stages: [{ id: "work", op: "compute", us: 400_000 }] };
    const c = campaign(tmp, { matrix: { backend: ["shm"], world_size: [2], variant: { a: { env: { TAG: tag } }, b: { env: { TAG: tag } } } } }, slowJob);
    const ids = pointIds((await exp(["plan", c.file, "--dir", c.dir])).stdout);
    const run = spawnRunner(["exp", "run", c.file, "--dir", c.dir]);
    await run.seen(/\[1\/2\] \w+ .* rep 1: done/);
    const ranks = async () => {
      for (let i = 0; i < 100 && findProcesses(path.join(c.dir, "points"), "TAG", tag).length < 3; i++) await new Promise((r) => setTimeout(r, 50));
      return findProcesses(path.join(c.dir, "points"), "TAG", tag);
    };
    const running = await ranks();
    assert.ok(running.length >= 3, "the launcher and its 2 ranks run");
    assert.deepEqual((await statusOf(c)).points.map((p) => p.state), ["done", "running"]);
    const second = await exp(["run", c.file, "--dir", c.dir]);
    assert.equal(second.code, 2);
    assert.match(second.stderr, new RegExp(`exp run pid ${run.pid} is working on this campaign`));
    run.child.kill("SIGINT");
    const ended = await run.exited;
    assert.equal(ended.code, 130, ended.stderr);
    assert.match(ended.stderr, /interrupted by SIGINT; run again to resume/);
    assert.deepEqual(await survivors(running), [], "no rank left running");
    let s = await statusOf(c);
    assert.deepEqual(s.points.map((p) => p.state), ["done", "pending"], "the interrupted point is not done");
    const doneLog = path.join(c.dir, "points", s.points[0].point_id, "rep-1", "log.txt");
    const before = statSync(doneLog).mtimeMs;

    const resumed = await exp(["run", c.file, "--dir", c.dir]);
    assert.equal(resumed.code, 0, resumed.stderr);
    assert.match(resumed.stderr, /exp: 1 repetition to run of 2 points/);
    s = await statusOf(c);
    assert.deepEqual(s.points.map((p) => [p.point_id, p.state, p.attempts]), [[ids[0], "done", 1], [ids[1], "done", 2]]);
    assert.equal(statSync(doneLog).mtimeMs, before, "the done point was not run again");

    // Editing the job changes every point's id: the old points are stale, and running again sets them aside.
    writeFileSync(path.join(tmp, "job.json"), JSON.stringify({ ...slowJob, stages: [{ id: "work", op: "compute", us: 1000 }] }));
    const plan = await exp(["plan", c.file, "--dir", c.dir]);
    assert.match(plan.stdout, /: 2 stale\n/);
    assert.match(plan.stdout, new RegExp(`stale .* \\(replaces ${ids[0]}\\)`));
    const rerun = await exp(["run", c.file, "--dir", c.dir]);
    assert.equal(rerun.code, 0, rerun.stderr);
    assert.match(rerun.stderr, new RegExp(`replaces stale ${ids[0]} .* old results kept in .*stale`));
    s = await statusOf(c);
    assert.deepEqual(s.counts.done, 2);
    assert.ok(!s.points.some((p) => ids.includes(p.point_id)));
    assert.equal(readdirSync(path.join(c.dir, "stale")).length, 2, "the old results kept aside");
  });
});

test("one runner per campaign: of two started together one runs and one exits 2; kill -9 of exp run takes its launcher and ranks with it, and a resume takes over the lock and finishes", async () => {
  await withTempDir("spmd-exp-lock-", async (tmp) => {
    const tag = `exp-lock-${process.pid}`;
    const slowJob = { name: "slow", iterations: 3, warmup: 0, tensors: {}, stages: [{ id: "work", op: "compute", us: 300_000 }] };
    const c = campaign(tmp, { matrix: { backend: ["shm"], world_size: [2], variant: { a: { env: { TAG: tag } } } } }, slowJob);
    const [first, second] = [spawnRunner(["exp", "run", c.file, "--dir", c.dir]), spawnRunner(["exp", "run", c.file, "--dir", c.dir])];
    const ended = await Promise.all([first.exited, second.exited]);
    assert.deepEqual(ended.map((e) => e.code).sort(), [0, 2], ended.map((e) => e.stderr).join("\n"));
    const refused = ended.find((e) => e.code === 2);
    const winner = [first, second][ended.findIndex((e) => e.code === 0)];
    assert.match(refused.stderr, new RegExp(`^runner: --dir \\S+: (exp run pid ${winner.pid} is working on this campaign|another exp run took the lock at the same time) \\(\\S+run\\.json\\)\n$`));
    assert.equal((await statusOf(c)).points[0].attempts, 1, "one repetition ran, once");

    // kill -9 of a run in its repetition (6.4 s of compute): the launcher and its ranks end too, well before
    // the repetition would.
    rmSync(c.dir, { recursive: true });
    writeFileSync(path.join(tmp, "job.json"), JSON.stringify({ ...slowJob, iterations: 8, stages: [{ id: "work", op: "compute", us: 800_000 }] }));
    const run = spawnRunner(["exp", "run", c.file, "--dir", c.dir]);
    let ranks = [];
    for (let i = 0; i < 200 && ranks.length < 3; i++, await new Promise((r) => setTimeout(r, 50))) ranks = findProcesses(path.join(c.dir, "points"), "TAG", tag);
    assert.ok(ranks.length >= 3, "the launcher and its 2 ranks run");
    run.child.kill("SIGKILL");
    await run.exited;
    assert.deepEqual(await survivors(ranks, 3000), [], "no launcher or rank survives its controller");
    const resumed = await exp(["run", c.file, "--dir", c.dir]);
    assert.equal(resumed.code, 0, resumed.stderr);
    assert.match(resumed.stderr, new RegExp(`^exp: taking over the lock of exp run pid ${run.pid}, which is no longer running`, "m"));
    const s = await statusOf(c);
    assert.deepEqual([s.points[0].state, s.points[0].attempts], ["done", 2]);
    const log = readFileSync(path.join(c.dir, "points", s.points[0].point_id, "rep-1", "log.txt"), "utf8");
    assert.doesNotMatch(log, /SIGTERM|interrupted/i, "the killed attempt's files were cleared before the rerun");
    // A lock whose pid now belongs to another process (this test's, started at another time) is stale too.
    writeFileSync(path.join(c.dir, "run.json"), JSON.stringify({ pid: process.pid, started: "1", jobs: [] }));
    const again = await exp(["run", c.file, "--dir", c.dir]);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stderr, new RegExp(`^exp: taking over the lock of exp run pid ${process.pid}, which is no longer running`, "m"));
  });
});

test("the files are the truth: a corrupt or truncated campaign.db is rebuilt from points/ with one line", async () => {
  await withTempDir("spmd-exp-db-", async (tmp) => {
    const c = campaign(tmp, { matrix: { backend: ["shm"], world_size: [2] } });
    assert.equal((await exp(["run", c.file, "--dir", c.dir])).code, 0);
    const db = path.join(c.dir, "campaign.db");
    const count = "SELECT count(*) AS n FROM rows";
    const good = readFileSync(db);
    for (const [what, bytes] of [["garbage", Buffer.from("not a database at all\n".repeat(100))], ["truncated", good.subarray(0, 1024)], ["emptied", Buffer.alloc(0)]]) {
      writeFileSync(db, bytes);
      const q = await exp(["query", count, "--dir", c.dir, "--format", "csv"]);
      assert.equal(q.code, 0, `${what}: ${q.stderr}`);
      assert.equal(q.stdout, "n\n2\n", what);
      if (bytes.length) assert.match(q.stderr, /^exp: \S+campaign\.db could not be used \(.+\); rebuilt from \S+points\n$/, what);
    }
  });
});

const unshareMissing = process.getuid?.() !== 0 ? "needs root (a tmpfs in a mount namespace of its own)"
  : spawnSync("unshare", ["-m", "true"]).status !== 0 ? "unshare -m does not work here" : false;

test("a full disk: exp run names the file and ENOSPC in one line, exit 1; what was done stays done, and a run with space again finishes", { skip: unshareMissing && !process.env.CI ? unshareMissing : false }, async () => {
  await withTempDir("spmd-exp-full-", async (tmp) => {
    const one = campaign(tmp, { matrix: { backend: ["shm"], world_size: [2] }, repetitions: 1 });
    const two = path.join(tmp, "two.json");
    writeFileSync(two, readFileSync(one.file, "utf8").replace('"repetitions": 1', '"repetitions": 2'));
    const mnt = path.join(tmp, "mnt");
    mkdirSync(mnt);
    // In a mount namespace of its own: a 1 MiB tmpfs, one repetition run, then for each N the disk filled
    // to N KiB free before a second repetition (0: the lock cannot be written; 40: the index or a point's file),
    // and the same run again once the space is back. Each attempt starts from the one-repetition campaign.
    const leave = [0, 40];
    const script = `set -e
mount -t tmpfs -o size=1m tmpfs ${mnt}
node ${RUNNER} exp run ${one.file} --dir ${mnt}/c --quiet
cp -a ${mnt}/c ${tmp}/done
for n in ${leave.join(" ")}; do
  rm -rf ${mnt}/c; cp -a ${tmp}/done ${mnt}/c
  avail=$(df -k --output=avail ${mnt} | tail -1)
  head -c $(( (avail - n) * 1024 )) /dev/zero > ${mnt}/fill
  node ${RUNNER} exp run ${two} --dir ${mnt}/c --quiet 2> ${tmp}/err-$n && echo 0 > ${tmp}/code-$n || echo $? > ${tmp}/code-$n
  rm ${mnt}/fill
  node ${RUNNER} exp run ${two} --dir ${mnt}/c --quiet 2> ${tmp}/again-$n
  cp ${mnt}/c/points/*/rep-2/marker.json ${tmp}/marker-$n.json
  cp ${mnt}/c/points/*/rep-1/results.json ${tmp}/rep1-$n.json
done`;
    const p = spawnSync("unshare", ["-m", "sh", "-c", script], { cwd: REPO, encoding: "utf8", timeout: 120_000 });
    assert.equal(p.status, 0, p.stderr);
    const rep1 = readFileSync(path.join(tmp, "done", "points", readdirSync(path.join(tmp, "done", "points"))[0], "rep-1", "results.json"), "utf8");
    for (const n of leave) {
      const [code, err] = [Number(readFileSync(path.join(tmp, `code-${n}`), "utf8")), readFileSync(path.join(tmp, `err-${n}`), "utf8")];
      if (n === 0) assert.equal(code, 1, "a full disk fails the run");
      if (code !== 0) {
        assert.equal(code, 1, `${n} KiB free: ${err}`);
        assert.match(err, new RegExp(`^runner: (ENOSPC: no space left on device, \\w+ \\(${mnt}/c/\\S+\\)|${mnt}/c/campaign\\.db: ENOSPC, the disk is full .*)\\n$`), `${n} KiB free: one line naming the file`);
      }
      assert.equal(readFileSync(path.join(tmp, `again-${n}`), "utf8"), "", `${n} KiB free: the run with space again says nothing (no stale lock to take over)`);
      assert.equal(JSON.parse(readFileSync(path.join(tmp, `marker-${n}.json`), "utf8")).state, "done", `${n} KiB free: the second repetition is done`);
      assert.equal(readFileSync(path.join(tmp, `rep1-${n}.json`), "utf8"), rep1, `${n} KiB free: the first repetition is as it was`);
    }
  });
});

test("the example campaign experiments/backends.json runs with the local executor, every element right, and its report is written", async () => {
  await withTempDir("spmd-exp-example-", async (tmp) => {
    const file = path.join(REPO, "experiments/backends.json");
    const dir = path.join(tmp, "backends");
    const p = await exp(["run", file, "--dir", dir]);
    assert.equal(p.code, 0, p.stderr);
    const s = JSON.parse((await exp(["status", file, "--dir", dir, "--json"])).stdout);
    assert.deepEqual([s.counts.done, s.points.length, s.excluded.length], [5, 5, 3]);
    const rows = JSON.parse((await exp(["query", "SELECT count(*) AS n, sum(wrong) AS wrong FROM rows", "--dir", dir, "--format", "json"])).stdout);
    assert.deepEqual(rows, [{ n: 5 * 2 * 2 * 3, wrong: 0 }], "5 points x 2 repetitions x 2 stages x 3 sizes, every element right");
    assert.equal((await exp(["report", file, "--dir", dir])).code, 0);
  });
});

const mpiBuilt = /\bmpi=built\b/.test(spawnSync(process.execPath, [RUNNER, "info"], { cwd: REPO, encoding: "utf8" }).stdout);

test("the mpirun executor runs each repetition as mpirun -np W", { skip: mpiBuilt || process.env.CI ? false : "the addon was built without MPI" }, async () => {
  await withTempDir("spmd-exp-mpirun-", async (tmp) => {
    const c = campaign(tmp, { matrix: { backend: ["mpi"], world_size: [2] }, executor: { kind: "mpirun", args: ["--allow-run-as-root", "--oversubscribe"] } });
    assert.match((await exp(["run", c.file, "--dir", c.dir, "--dry-run"])).stdout, /^mpirun -np 2 --allow-run-as-root --oversubscribe \S+node \S+runner\/index\.js \S+job\.json --backend mpi /);
    const p = await runNode([RUNNER, "exp", "run", c.file, "--dir", c.dir], envForMpi());
    assert.equal(p.code, 0, p.stderr);
    const [id] = readdirSync(path.join(c.dir, "points"));
    const doc = JSON.parse(readFileSync(path.join(c.dir, "points", id, "rep-1", "results.json"), "utf8"));
    assert.deepEqual([doc.backend, doc.world_size, doc.results.every((r) => r.wrong === 0)], ["mpi", 2, true]);
    assert.match(doc.manifest.library, /MPI/);
  });
});
