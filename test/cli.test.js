// The command line as users and scripts meet it: the quick start, torchrun-style starts, validate,
// and bad input (one line, exit code 2, nothing run).
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { spawnSync } from "node:child_process";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { REPO, RUNNER, runNode, runRanks, shmLeftovers, spawnRunner } from "./helpers/ranks.js";
import { requiredTest } from "./helpers/required.js";

const tmp = () => mkdtempSync(path.join(os.tmpdir(), "spmd-cli-"));
const QUICKSTART = "jobs/quickstart.json";
const TABLE_HEAD = /# stage +op +algo +size +count +type +redop +root +time +algbw +busbw +#wrong/;

function assertOneLineError(p, pattern) {
  assert.equal(p.code, 2, `exit code ${p.code}, stderr: ${p.stderr}`);
  // Rank-labelled log lines may precede it; the error itself is one line.
  const lines = p.stderr.trimEnd().split("\n").filter((l) => !/^\[rank \d+\] (info|debug):/.test(l));
  assert.equal(lines.length, 1, `expected one line, got:\n${p.stderr}`);
  assert.match(lines[0], pattern);
  assert.doesNotMatch(p.stderr, /\n\s+at /, "no stack trace");
}

test("the quick start: launch -n 4 prints the table with 0 wrong and writes results", async () => {
  const out = tmp();
  try {
    const json = path.join(out, "r.json");
    const p = await runNode([RUNNER, "launch", "-n", "4", QUICKSTART, "--out", out, "--json", json, "--iterations", "3"]);
    assert.equal(p.code, 0, p.stderr);
    assert.match(p.stdout, TABLE_HEAD);
    assert.match(p.stdout, /# Avg bus bandwidth {4}: \d+\.\d{4}/);
    assert.match(p.stdout, /# Out of bounds values : 0 OK/);
    const doc = JSON.parse(readFileSync(json, "utf8"));
    // core_round_trip_ns: 4 ranks on 2 CPUs, so rank 0's two threads timed it, unless the machine kept them off their
    // CPUs for 200 ms (a busy CI lane).
    const probed = "core_round_trip_ns" in doc;
    assert.deepEqual(Object.keys(doc), ["version", "job", "world_size", "backend", "topology", "copy_path", ...(probed ? ["core_round_trip_ns"] : []), "results", "average_bus_bandwidth", "ranks", "manifest"]);
    assert.match(doc.copy_path, /^(single-copy: cma|staged)/);
    if (probed) assert.ok(doc.core_round_trip_ns.length === (os.availableParallelism() >= 4 ? 3 : 1) && doc.core_round_trip_ns.every((ns) => ns > 0 && ns < 1e6), JSON.stringify(doc.core_round_trip_ns));
    assert.deepEqual(doc.ranks.map((u) => u.rank), [0, 1, 2, 3]);
    assert.equal(doc.world_size, 4);
    assert.equal(doc.backend, "shm");
    assert.deepEqual(doc.topology, { hosts: [{ name: os.hostname(), ranks: [0, 1, 2, 3] }], links: { shm: 6, tcp: 0 } });
    assert.match(p.stdout, /# 1 host: \S+ \(ranks 0-3\); links: 6 shm/);
    assert.deepEqual(Object.keys(doc.results[0]), [
      "stage", "op", "size", "count", "type", "redop", "root", "algorithm", "time", "algbw", "busbw", "wrong", "wire_bytes", "rel_error",
      "start_us", "per_rank_avg_us", "slowest_rank", "straggler_us",
      // The quick start's igather runs on a stream of its own, so its steps are a graph of concurrent stages.
      "graph",
    ]);
    assert.deepEqual(Object.keys(doc.results[0].time), ["avg_us", "p50_us", "p95_us", "p99_us", "stddev_us", "min_us", "max_us"]);
    const ar = doc.results.find((r) => r.stage === "allreduce");
    assert.equal(ar.size, 4 * ar.count);
    assert.ok(Math.abs(ar.busbw - ar.algbw * 1.5) < 1e-9, "allreduce busbw = algbw × 2(W-1)/W");
    assert.ok(doc.results.every((r) => r.wrong === 0 || (r.wrong === null && r.size === 0)));
    const runs = readdirSync(out).filter((d) => d.startsWith("quickstart-"));
    assert.equal(runs.length, 1);
    assert.deepEqual(readdirSync(path.join(out, runs[0])).sort(), ["report.html", "results.csv", "results.json", "summary.txt", "table.txt"]);
    const csv = readFileSync(path.join(out, runs[0], "results.csv"), "utf8").trimEnd().split("\n");
    assert.ok(csv[0].startsWith("stage,op,size,count,type,redop,root,algorithm,avg_us,p50_us,p95_us,p99_us,stddev_us,min_us,max_us,algbw,busbw,wrong,wire_bytes,rel_error,"), csv[0]);
    assert.ok(csv[0].split(",").includes("per_rank_avg_us"), csv[0]);
    assert.equal(csv.length, doc.results.length + 1);
    assert.match(csv[1], /^allreduce,allreduce,4194304,1048576,float32,sum,,shared,[\d.]+,/);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

test("torchrun-style start: 3 separate processes form one job; only rank 0 prints the table", async () => {
  const out = tmp();
  try {
    const ranks = await runRanks(3, [QUICKSTART, "--out", out, "--iterations", "2", "--warmup", "1"]);
    ranks.forEach((p, r) => assert.equal(p.code, 0, `rank ${r}: ${p.stderr}`));
    assert.match(ranks[0].stdout, TABLE_HEAD);
    assert.match(ranks[0].stdout, /job quickstart, 3 ranks, backend shm/);
    assert.equal(ranks[1].stdout, "");
    assert.equal(ranks[2].stdout, "");
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

test("two runs never share a results directory", async () => {
  const out = tmp();
  try {
    for (let i = 0; i < 2; i++) {
      const p = await runNode([RUNNER, QUICKSTART, "--out", out, "--iterations", "1", "--warmup", "0", "--quiet"]);
      assert.equal(p.code, 0, p.stderr);
      assert.equal(p.stdout, "", "--quiet prints no table");
    }
    assert.equal(readdirSync(out).length, 2);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

test("validate checks a job without running it", async () => {
  const ok = await runNode([RUNNER, "validate", QUICKSTART]);
  assert.equal(ok.code, 0, ok.stderr);
  assert.match(ok.stdout, /jobs\/quickstart.json: ok \(12 stages/);
  const dir = tmp();
  try {
    const job = JSON.parse(readFileSync(QUICKSTART, "utf8"));
    job.stages[6].root = 5;
    const file = path.join(dir, "root.json");
    writeFileSync(file, JSON.stringify(job));
    assertOneLineError(await runNode([RUNNER, "validate", "-n", "4", file]), /root\.json: stages\[6\]\.root: .*4/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("validate --backend mpi refuses a stage past MPI's int counts, at the sweep point that reaches it", async () => {
  const dir = tmp();
  try {
    const job = {
      name: "mpi-limit",
      tensors: { h: { dtype: "float16", count: 16 }, small: { dtype: "float16", count: 8 } },
      stages: [{ id: "fine", op: "allreduce", input: "small" }, { id: "big", op: "reduce_scatter", inputs: ["h", "small"], coalesced: true }],
      sweep: { count: ["1Ki", "2Gi"] },
    };
    const file = path.join(dir, "limit.json");
    writeFileSync(file, JSON.stringify(job));
    // The limit is MPI's: other backends take the job.
    assert.equal((await runNode([RUNNER, "validate", "--backend", "shm", file])).code, 0);
    const p = await runNode([RUNNER, "validate", "-n", "2", "--backend", "mpi", file]);
    assertOneLineError(p, /limit\.json: stages\[0\]: stage "fine" moves 2147483648 elements in one MPI call at sweep count 2147483648, more than MPI's int count allows \(2147483647\)/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("bad input: one line naming file and JSON path, exit code 2, no rank started", async () => {
  const dir = tmp();
  try {
    const bad = path.join(dir, "bad.json");
    writeFileSync(bad, JSON.stringify({ name: "x", tensors: { t: { dtype: "float32", count: "4Qi" } }, stages: [{ id: "a", op: "allreduce", input: "t" }] }));
    assertOneLineError(await runNode([RUNNER, bad]), /^runner: .*bad\.json: line 1 column \d+: tensors\.t\.count: /);
    // Checked once by the launcher, before any rank starts: one line, not one per rank.
    assertOneLineError(await runNode([RUNNER, "launch", "-n", "16", bad]), /^runner: .*bad\.json: line 1 column \d+: tensors\.t\.count: /);
    assertOneLineError(await runNode([RUNNER, path.join(dir, "missing.json")]), /missing\.json: cannot read file/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("bad flags and environment are one-line errors with exit code 2", async () => {
  // A mistyped option is named as typed, with the option it was most likely meant to be.
  assertOneLineError(await runNode([RUNNER, QUICKSTART, "--iteratons", "3"]), /^runner: unknown option --iteratons \(did you mean --iterations\?\) \(see --help\)$/);
  assertOneLineError(await runNode([RUNNER, "--iteration", "5", QUICKSTART]), /^runner: unknown option --iteration \(did you mean --iterations\?\)/);
  assertOneLineError(await runNode([RUNNER, QUICKSTART, "--chek"]), /^runner: unknown option --chek \(did you mean --check\?\)/);
  // Before the job file, a mistyped flag takes it for its value: the flag is the mistake, not a missing job file.
  assertOneLineError(await runNode([RUNNER, "launch", "-n", "2", "--chek", QUICKSTART]), /^runner: unknown option --chek \(did you mean --check\?\)/);
  assertOneLineError(await runNode([RUNNER, "doctor", "--szie", "4"]), /^runner: unknown option --szie \(did you mean --size\?\)/);
  assertOneLineError(await runNode([RUNNER, QUICKSTART, "--ab", "--zzzzzz"]), /^runner: unknown options --ab, --zzzzzz \(see --help\)$/);
  assertOneLineError(await runNode([RUNNER, QUICKSTART, "--iterations", "0"]), /--iterations: expected an integer >= 1, got 0/);
  assertOneLineError(await runNode([RUNNER, QUICKSTART, "--backend", "carrier-pigeon"]), /^runner: --backend "carrier-pigeon": expected one of "auto", "shm", .*"hccl"/);
  assertOneLineError(await runNode([RUNNER, QUICKSTART], { RANK: "1" }), /environment: RANK=1 is set but WORLD_SIZE, MASTER_ADDR, MASTER_PORT are missing/);
  assertOneLineError(await runNode([RUNNER, "build", "-D", "SPMD_CUDA"]), /--define SPMD_CUDA: expected NAME=VALUE/);
  const mpiBuilt = /\bmpi=built\b/.test((await runNode([RUNNER, "info"])).stdout);
  assertOneLineError(
    await runNode([RUNNER, QUICKSTART, "--backend", "mpi"]),
    mpiBuilt ? /backend mpi: needs an MPI launcher/ : /backend mpi is not available in this build/,
  );
});

test("runner launch checks the backend, --iface, --out and --json before it starts any rank: one line, exit 2", async () => {
  const info = (await runNode([RUNNER, "info"])).stdout;
  const launch = (...flags) => runNode([RUNNER, "launch", "-n", "2", QUICKSTART, "--quiet", ...flags]);
  // Each rank said these itself (2-4 lines), and a nccl rank's end reached the other as "connection ... lost".
  assertOneLineError(await launch("--backend", "mpi"), /^runner: backend mpi: needs an MPI launcher \(mpirun, mpiexec or srun --mpi=pmix\); this process was started by runner launch$/);
  if (/^nccl: not loadable/m.test(info)) assertOneLineError(await launch("--backend", "nccl"), /^runner: nccl: cannot load libnccl\.so\.2: /);
  assertOneLineError(await launch("--iface", "nosuch0"), /^runner: tcp\.iface "nosuch0": no interface matches it with a usable address \(here: lo /);
  assertOneLineError(await launch("--out", "/proc/foo"), /^runner: --out \/proc\/foo: cannot create the directory: /);
  assertOneLineError(await launch("--json", "/proc/x/y.json"), /^runner: --json \/proc\/x\/y\.json: cannot create the directory \/proc\/x: /);
});

test("a rank from another job cannot join: the rendezvous rejects its token", async () => {
  const dir = tmp();
  try {
    const other = path.join(dir, "other.json");
    const job = JSON.parse(readFileSync(QUICKSTART, "utf8"));
    writeFileSync(other, JSON.stringify({ ...job, name: "other" }));
    const port = String(20000 + Math.floor(Math.random() * 20000));
    const env = (rank) => ({ RANK: String(rank), WORLD_SIZE: "2", LOCAL_RANK: String(rank), LOCAL_WORLD_SIZE: "2", MASTER_ADDR: "127.0.0.1", MASTER_PORT: port });
    const [r0, r1] = await Promise.all([
      runNode([RUNNER, QUICKSTART, "--out", dir, "--timeout", "5", "--config", writeConfig(dir)], env(0)),
      // The stranger waits as long as a rank does (60 s) for rank 0 to listen: rank 0's start-up took over 3 s
      // beside the other lane, and the stranger gave up before it was ever refused.
      runNode([RUNNER, other, "--out", dir], env(1)),
    ]);
    assert.notEqual(r1.code, 0);
    assert.match(r1.stderr, /wrong job token/);
    assert.notEqual(r0.code, 0, "rank 0 gives up waiting for its partner");
    assert.deepEqual(shmLeftovers([r0.pid, r1.pid]), []);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// Rank 0 waits 15 s for its partner, long enough for the stranger's start-up on a loaded machine.
function writeConfig(dir) {
  const file = path.join(dir, "fast-fail.json");
  writeFileSync(file, JSON.stringify({ connectTimeoutSec: 15 }));
  return file;
}

test("a wrong word or number names the option, what was given and what fits", async () => {
  assertOneLineError(await runNode([RUNNER, QUICKSTART, "--backend", "shmm"]), /^runner: --backend "shmm": expected one of "auto", "shm", "tcp", "shm\+tcp", "mpi", "nccl", "hccl"/);
  assertOneLineError(await runNode([RUNNER, QUICKSTART, "--log-level", "verbose"]), /^runner: --log-level "verbose": expected one of "error", "warn", "info", "debug"/);
  assertOneLineError(await runNode([RUNNER, "lauch", "-n", "2", QUICKSTART]), /^runner: lauch is not a command \(did you mean launch\?\)/);
  assertOneLineError(await runNode([RUNNER, "frobnicate"]), /^runner: frobnicate is not a command \(commands: run, launch, validate, info, compare, doctor, exp, build, trace\)/);
  assertOneLineError(await runNode([RUNNER, "validate", "-n", "0", QUICKSTART]), /^runner: -n: expected an integer from 1 to 65536 \(the most ranks a job runs at\), got 0/);
  assertOneLineError(await runNode([RUNNER, "validate", "-n", "abc", QUICKSTART]), /^runner: -n: expected an integer from 1 to 65536 \(the most ranks a job runs at\), got abc/);
  assertOneLineError(await runNode([RUNNER, "launch", "-n", "abc", QUICKSTART]), /^runner: -n: expected an integer from 1 to 65536 \(the most ranks a job runs at\), got abc/);
  assertOneLineError(await runNode([RUNNER, QUICKSTART, "--iterations", "many"]), /^runner: --iterations: expected an integer >= 1, got many/);
  assertOneLineError(await runNode([RUNNER, QUICKSTART, "--timeout", "0"]), /^runner: --timeout: expected seconds > 0, got 0/);
  assertOneLineError(await runNode([RUNNER, "launch", QUICKSTART]), /^runner: launch: give the number of ranks to start: -n N$/);
  // The README's names only: -N is not -n, and "nprocs" is a name the README never uses.
  const upper = await runNode([RUNNER, "launch", "-N", "2", QUICKSTART]);
  assertOneLineError(upper, /^runner: unknown option -N \(did you mean -n\?\)/);
  assert.doesNotMatch(upper.stderr, /nprocs/);
  assertOneLineError(await runNode([RUNNER, QUICKSTART, "--json", "/proc/x.json"]), /^runner: --json \/proc\/x\.json: cannot write in \/proc: /);
});

test("every script in scripts/ and bench/ that reads options: --help prints its usage (exit 0), a wrong option one line (exit 2)", async () => {
  const scripts = ["scripts", "bench"].flatMap((d) => readdirSync(path.join(REPO, d)).filter((f) => f.endsWith(".mjs")).map((f) => path.join(d, f)));
  const reading = scripts.filter((f) => /\b(parseArgs|scriptArgs)\(|process\.argv\.slice\(2\)/.test(readFileSync(path.join(REPO, f), "utf8")));
  const own = reading.filter((f) => f !== "scripts/args.mjs" && f !== "bench/run.mjs"); // bench/run.mjs: yargs, its own --help
  assert.deepEqual(own.filter((f) => !readFileSync(path.join(REPO, f), "utf8").includes("scriptArgs(import.meta.url")), [], "through scripts/args.mjs");
  for (const f of own) {
    const help = await runNode([f, "--help"]);
    assert.equal(help.code, 0, `${f} --help: ${help.stderr}`);
    assert.match(help.stdout, /^ {2}node /m, `${f} --help shows how to run it`);
    assertOneLineError(await runNode([f, "--bogus"]), new RegExp(`^${f}: Unknown option '--bogus' \\(options: .*; see --help\\)$`));
  }
  assert.ok(own.includes("scripts/scale.mjs") && own.length >= 6, own.join(" "));
  // The shell scripts: --help through scripts/usage.sh, before anything runs (gpu-pack.sh made a folder "--help").
  const shells = ["scripts", "scripts/slurm", "bench/verdicts"].flatMap((d) => readdirSync(path.join(REPO, d)).filter((f) => f.endsWith(".sh") && f !== "usage.sh").map((f) => path.join(d, f)));
  assert.deepEqual(shells.filter((f) => !/^\. "\$\(dirname "\$0"\)\/(\.\.\/)*(scripts\/)?usage\.sh" "\$@"$/m.test(readFileSync(path.join(REPO, f), "utf8"))), [], "through scripts/usage.sh");
  for (const f of shells) {
    const help = spawnSync("bash", [f, "--help"], { cwd: REPO, encoding: "utf8" });
    assert.equal(help.status, 0, `${f} --help: ${help.stderr}`);
    assert.equal(help.stdout.split("\n")[0], readFileSync(path.join(REPO, f), "utf8").split("\n")[1].replace(/^# /, ""), `${f} --help prints its header`);
  }
  assert.ok(shells.length >= 4, shells.join(" "));
});

test("a relative SPMD_BUILD_DIR is taken from the package root, whatever the folder; one that holds no addon is named, exit 2", () => {
  const dir = tmp();
  try {
    const run = (buildDir) => spawnSync(process.execPath, [RUNNER, tinyJob(dir), "--out", dir, "--quiet"], { cwd: dir, encoding: "utf8", env: { ...process.env, SPMD_BUILD_DIR: buildDir } });
    const built = run("native/build");
    assert.equal(built.status, 0, built.stderr);
    const missing = run("native/build-nosuch");
    assertOneLineError({ code: missing.status, stderr: missing.stderr },
      new RegExp(`^runner: SPMD_BUILD_DIR=native/build-nosuch: no addon built in ${REPO.replaceAll("/", "\\/")}\\/native\\/build-nosuch; build it with \`SPMD_BUILD_DIR=native/build-nosuch node runner build\`, or unset SPMD_BUILD_DIR$`));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** A one-rank job of one broadcast, unchecked: a second's run. */
function tinyJob(dir, extra = {}) {
  const file = path.join(dir, "tiny.json");
  writeFileSync(file, JSON.stringify({
    name: "tiny", iterations: 2, warmup: 0, tensors: { t: { dtype: "float32", count: 64 } }, stages: [{ id: "b", op: "broadcast", input: "t", root: 0 }], ...extra,
  }));
  return file;
}

test("one rank: '1 rank', a broadcast that moves nothing reports 0 bytes and 0 busbw, an unchecked run says so, and no token warning", async () => {
  const dir = tmp();
  try {
    const json = path.join(dir, "r.json");
    const p = await runNode([RUNNER, tinyJob(dir), "--out", dir, "--json", json], { SPMD_RUNNER_TOKEN: "" });
    assert.equal(p.code, 0, p.stderr);
    assert.doesNotMatch(p.stderr, /SPMD_RUNNER_TOKEN/, "a rank alone meets no one: its derived secret exposes nothing");
    assert.match(p.stdout, /job tiny, 1 rank, backend/);
    assert.match(p.stdout, /# Out of bounds values : N\/A \(not checked\)/);
    const [row] = JSON.parse(readFileSync(json, "utf8")).results;
    assert.equal(row.wire_bytes, 0);
    assert.equal(row.busbw, 0);
    assert.ok(row.algbw > 0, "algbw is the root's bytes over the time, as nccl-tests reports it");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a compute stage cut by its deadline says how long it was asked to run, in seconds", async () => {
  const dir = tmp();
  try {
    const job = tinyJob(dir, { timeoutSec: 1, stages: [{ id: "w", op: "compute", us: 3_000_000 }] });
    const p = await runNode([RUNNER, job, "--out", dir]);
    assert.notEqual(p.code, 0);
    assert.match(p.stderr, /stage w: deadline passed during 3 s of compute/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

const TASKSET = spawnSync("taskset", ["-c", "0", "true"]).status === 0;

test("launch -n 2 on one core warns once about the oversubscription; the ranks' errors name runner launch", { skip: !TASKSET && !process.env.CI && "no taskset" }, async () => {
  const dir = tmp();
  try {
    // Every rank fails alike at a deadline (--backend mpi, which this test used, is now refused before any rank starts).
    const job = tinyJob(dir, { timeoutSec: 1, stages: [{ id: "w", op: "compute", us: 3_000_000 }] });
    const p = await spawnRunner(["launch", "-n", "2", job, "--out", dir], {}, { wrap: ["taskset", "-c", "0"] }).exited;
    assert.equal(p.stderr.match(/runner launch: 2 ranks on 1 core: the ranks take turns/g)?.length, 1, p.stderr);
    // Said once, naming the ranks; and the ranks know who started them.
    assert.equal(p.stderr.match(/deadline passed/g)?.length, 1, p.stderr);
    assert.match(p.stderr, /^runner \(ranks 0,1\): stage w: deadline passed during 3 s of compute$/m);
    assert.match(p.stdout + p.stderr, /rank 0 of 2 \(runner launch\)/);
    assert.doesNotMatch(p.stdout + p.stderr, /torchrun/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

function offlineBuildMissing() {
  if (process.getuid?.() !== 0) return "not root (unshare -n makes a network namespace without routes)";
  if (spawnSync("unshare", ["--version"]).error) return "unshare not found (util-linux)";
  if (spawnSync("mpicc.mpich", ["-show"]).error) return "mpicc.mpich not found (install mpich libmpich-dev)";
  return undefined;
}
const offlineTest = requiredTest("cli.test.js (build offline)", offlineBuildMissing());

offlineTest("the README's MPICH build needs no network: runner build uses the running Node's headers", async () => {
  const dir = tmp();
  try {
    // No cmake-js cache of downloaded headers and no npm nodedir (`npm test` passes npm's): only Node's own.
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_config_/i.test(k)));
    const build = spawnSync("unshare", ["-n", process.execPath, RUNNER, "build", "-D", "MPI_C_COMPILER=mpicc.mpich", "--target", "spmd_floor_check"], {
      cwd: REPO, encoding: "utf8", env: { ...env, HOME: dir, SPMD_BUILD_DIR: path.join(dir, "build-mpich") },
    });
    assert.equal(build.status, 0, `${build.stdout}${build.stderr}`.slice(-3000));
    assert.doesNotMatch(build.stdout + build.stderr, /fetch failed|nodejs\.org/);
    assert.match(build.stdout, /spmd: {3}MPI backend: built \(MPI [\d.]+: \S*libmpich/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
