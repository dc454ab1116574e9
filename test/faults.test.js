// Faults end every rank promptly with a message naming the culprit, log each rank's flight record, and
// leave nothing behind: a rank killed (-9) or stopped (SIGSTOP) mid-run, with and without a launcher, on
// shm and under mpirun. The faults are done to the processes from outside, so the runner has no test hook.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { test } from "node:test";
import { mpirun, mpiTest } from "./helpers/mpi.js";
import { alive, childrenOf, envOf, findProcesses, survivors } from "./helpers/procs.js";
import { freePort, rankEnv, REPO, RUNNER, runRanks, shmLeftovers, spawnRunner } from "./helpers/ranks.js";
import { writeSlowSweep } from "./helpers/slow-sweep.js";
import { withTempDir } from "./helpers/tmp.js";

const T = { timeout: 120_000 };
// Beyond the deadline itself: the MPI roll call (1 s), settling MPI requests (3 s) and a loaded machine.
const SLACK_MS = 12_000;
const RUNNING = /running 3 stages/;
const FLIGHT_RECORD = /flight record \(last \d+ ops, oldest first\):\n.* {2}#\d+ .* \d+ B/;

/** A job that runs until stopped: an allreduce, an igather on the second lane, a barrier after it. */
function longJob(dir, timeoutSec) {
  const file = path.join(dir, "long.json");
  writeFileSync(file, JSON.stringify({
    name: "long", iterations: 1_000_000, warmup: 0, timeoutSec,
    tensors: { t: { dtype: "float32", count: "64Ki" } },
    stages: [
      { id: "ar", op: "allreduce", input: "t" },
      { id: "ig", op: "igather", input: "t", root: 0 },
      { id: "bar", op: "barrier", after: ["ig"] },
    ],
  }));
  return file;
}

const withDir = (body) => withTempDir("spmd-fault-", body);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** W ranks started the way a user would in W shells; resolves once every rank runs the job's steps. */
async function startRanks(W, job, dir, extra = []) {
  const port = await freePort();
  const ranks = Array.from({ length: W }, (_, rank) =>
    spawnRunner([job, "--out", dir, "--log-level", "debug", "--log-all-ranks", ...extra], rankEnv(rank, W, port)),
  );
  await Promise.all(ranks.map((r) => r.seen(RUNNING)));
  await sleep(300);
  return ranks;
}

function refusesConnections(port) {
  return new Promise((resolve) => {
    const s = net.connect({ host: "127.0.0.1", port });
    s.on("connect", () => (s.destroy(), resolve(false)));
    s.on("error", () => resolve(true));
  });
}

test("kill -9 of one rank mid-run: the others exit non-zero within seconds naming it (shm)", T, () =>
  withDir(async (dir) => {
    const W = 3, victim = 1;
    const ranks = await startRanks(W, longJob(dir, 300), dir);
    const killedAt = Date.now();
    ranks[victim].child.kill("SIGKILL");
    const results = await Promise.all(ranks.map((r) => r.exited));
    const took = Date.now() - killedAt;
    assert.ok(took < 10_000, `survivors took ${took} ms to exit`);
    for (const [rank, r] of results.entries()) {
      if (rank === victim) continue;
      assert.notEqual(r.code, 0, `rank ${rank} should fail`);
      assert.match(r.stderr, /rank 1 \(pid \d+\) died/, `rank ${rank} names the dead rank:\n${r.stderr}`);
      assert.match(r.stderr, FLIGHT_RECORD, `rank ${rank} logs its flight record`);
    }
    assert.deepEqual(shmLeftovers(ranks.map((r) => r.pid)), []);
  }));

// shm ranks see each other's last sign of life in their segment; tcp ranks ask each other with a roll call
// over tcp, which a stopped rank takes (its kernel accepts) but does not answer.
const BLAMED = {
  shm: { stopped: /rank 2 silent for \d+\.\d s/, others: /holding up [^\n]*rank [013] silent/ },
  tcp: { stopped: /rank 2 did not answer the roll call within 1 s \(stopped or wedged\)/, others: /holding up [^\n]*rank [013] (silent|did not|is )/ },
};
for (const [backend, W] of [["shm", 3], ["tcp", 4]]) {
  test(`a stopped rank (SIGSTOP): the others give up at the deadline naming it, with their flight records (${backend})`, T, () =>
    withDir(async (dir) => {
      const stopped = 2, timeoutSec = 3;
      const ranks = await startRanks(W, longJob(dir, timeoutSec), dir, ["--backend", backend]);
      const stoppedAt = Date.now();
      ranks[stopped].child.kill("SIGSTOP");
      try {
        const others = await Promise.all(ranks.filter((_, r) => r !== stopped).map((r) => r.exited));
        const took = Date.now() - stoppedAt;
        assert.ok(took < timeoutSec * 1000 + SLACK_MS, `the others took ${took} ms to exit`);
        for (const r of others) {
          assert.equal(r.code, 1, r.stderr);
          assert.match(r.stderr, new RegExp(`deadline passed while .*; holding up op #\\d+ \\([^)]+\\): ${BLAMED[backend].stopped.source}`), r.stderr);
          assert.doesNotMatch(r.stderr, BLAMED[backend].others, "only the stopped rank is blamed");
          assert.match(r.stderr, FLIGHT_RECORD);
          assert.match(r.stderr, /: (timed out|aborted|peer gone) after \d/, "the op that failed is marked in the record");
        }
      } finally {
        ranks[stopped].child.kill("SIGCONT");
      }
      // Woken up, it finds the job aborted rather than waiting for peers that are gone.
      const late = await ranks[stopped].exited;
      assert.equal(late.code, 1);
      if (backend === "shm") assert.match(late.stderr, /rank \d aborted the job: .*rank 2 silent/);
      assert.deepEqual(shmLeftovers(ranks.map((r) => r.pid)), []);
    }));
}

// Issue 63 item 6, where no `runner launch` outlives the ranks (mpirun, srun, by hand): rank 0 finishes
// results.json itself when it learns of the death, naming the fault it met. Before: flight/ only.
test("by hand, kill -9 of rank 1 mid-sweep: rank 0 keeps the finished points in results.json, naming the death", T, () =>
  withDir(async (dir) => {
    const port = await freePort();
    const out = path.join(dir, "results");
    const ranks = [0, 1].map((rank) => spawnRunner([writeSlowSweep(dir), "--out", out, "--log-level", "debug"], rankEnv(rank, 2, port)));
    await ranks[0].seen(/\[rank 0\] debug: running .* at \{"count":64,/);
    ranks[1].child.kill("SIGKILL");
    const { code, stdout } = await ranks[0].exited;
    assert.notEqual(code, 0);
    const [run] = readdirSync(out);
    assert.ok(!readdirSync(path.join(out, run)).includes("journal.jsonl"));
    const { interrupted, results } = JSON.parse(readFileSync(path.join(out, run, "results.json"), "utf8"));
    assert.match(interrupted.by, /^the fault rank 0 met \(.*rank 1 \(pid \d+\) died/);
    const counts = interrupted.finished.map((p) => p.count);
    assert.ok(counts.length >= 2 && counts.length < 4, `finished: ${counts}`);
    assert.deepEqual(counts, [16, 32, 64, 128].slice(0, counts.length));
    assert.deepEqual(results.map((r) => r.count), counts.flatMap((c) => [c, 0]));
    assert.match(stdout, /# Interrupted {10}: by the fault rank 0 met \(.*\) after \d of 4 sweep points/);
  }));

test("a rank stopped before the ranks meet: every other rank ends at the connect deadline naming it", T, () =>
  withDir(async (dir) => {
    const W = 4, stopped = 2;
    const config = path.join(dir, "run.json");
    writeFileSync(config, JSON.stringify({ connectTimeoutSec: 3 }));
    const port = await freePort();
    const ranks = Array.from({ length: W }, (_, rank) => spawnRunner([longJob(dir, 3), "--out", dir, "--config", config], rankEnv(rank, W, port)));
    ranks[stopped].child.kill("SIGSTOP");
    const startedAt = Date.now();
    try {
      const others = await Promise.all(ranks.filter((_, r) => r !== stopped).map((r) => r.exited));
      assert.ok(Date.now() - startedAt < 3000 + SLACK_MS);
      for (const r of others) {
        assert.equal(r.code, 1, r.stderr);
        assert.match(r.stderr, /rendezvous: barrier "rendezvous\/joined" timed out after 3000 ms with 3 of 4 ranks arrived; not arrived: rank 2$/m);
      }
    } finally {
      ranks[stopped].child.kill("SIGKILL");
      ranks[stopped].child.kill("SIGCONT");
    }
    await ranks[stopped].exited;
  }));

test("runner launch: kill -9 of one rank ends the launch non-zero, the others name it first, then what was in flight, nothing is left behind", T, () =>
  withDir(async (dir) => {
    const W = 4, victim = 2;
    const out = path.join(dir, "results");
    const launcher = spawn(process.execPath, [RUNNER, "launch", "-n", String(W), longJob(dir, 300), "--out", out], { cwd: REPO });
    let stderr = "";
    launcher.stderr.on("data", (d) => (stderr += d));
    const exited = new Promise((resolve) => launcher.on("close", (code) => resolve(code)));
    // Rank 0 makes the run directory once every rank has joined; then the steps run.
    while (!existsSync(out) || readdirSync(out).length === 0) await sleep(50);
    await sleep(500);
    const children = childrenOf(launcher.pid);
    assert.equal(children.length, W);
    const port = Number(envOf(children[0], "MASTER_PORT"));
    const killedAt = Date.now();
    process.kill(children.find((pid) => envOf(pid, "RANK") === String(victim)), "SIGKILL");
    const code = await exited;
    const took = Date.now() - killedAt;
    assert.ok(took < 10_000, `the launch took ${took} ms to end`);
    assert.equal(code, 137, stderr);
    // The launcher's own lines, after the ranks' prefixed output: the cause first, then each error once with its
    // ranks, each followed by the ops it had in flight and where the whole records are; no page of ops.
    const lines = stderr.trimEnd().split("\n").filter((l) => !/^\[\d+\] |^runner launch: \d+ ranks on/.test(l));
    assert.equal(lines[0], "runner launch: rank 2 was killed by SIGKILL", stderr);
    assert.ok(lines.length <= 1 + 3 * (W - 1), `${lines.length} lines:\n${stderr}`);
    const named = lines.map((l) => /^runner \(ranks? ([\d,-]+)\): .*rank 2 \(pid \d+\) died/.exec(l)?.[1]).filter(Boolean);
    assert.deepEqual(named.flatMap((r) => r.split(",")).map(Number).sort(), [0, 1, 3], stderr);
    assert.match(stderr, /^runner \(ranks? [\d,-]+\): .*\n {2}in flight: #\d+ step \d+ \S+ .*\n(?: {2}in flight: .*\n)* {2}flight records: (\S+)\/\n/m);
    const [run] = readdirSync(out);
    const records = path.join(out, run, "flight");
    assert.match(stderr, new RegExp(`flight records: ${records}/`));
    assert.deepEqual(readdirSync(records).sort(), ["rank0.txt", "rank1.txt", "rank3.txt"]);
    for (const f of readdirSync(records)) assert.match(readFileSync(path.join(records, f), "utf8"), FLIGHT_RECORD);
    assert.deepEqual(await survivors(children), [], "rank processes left behind");
    assert.deepEqual(shmLeftovers(children), []);
    assert.ok(await refusesConnections(port), `something still listens on the rendezvous port ${port}`);
  }));

test("deadlines end to end: --timeout, the run configuration's timeoutSec and a stage's own all bound an op", T, () =>
  withDir(async (dir) => {
    // A compute stage longer than any deadline below: each rank gives up on it at its deadline.
    const job = (stageTimeout) => {
      const file = path.join(dir, `slow${stageTimeout ?? ""}.json`);
      writeFileSync(file, JSON.stringify({
        name: "slow", iterations: 1, warmup: 0,
        stages: [{ id: "work", op: "compute", us: 60e6, ...(stageTimeout && { timeoutSec: stageTimeout }) }],
      }));
      return file;
    };
    const config = path.join(dir, "run.json");
    writeFileSync(config, JSON.stringify({ timeoutSec: 1 }));
    const cases = [
      { args: [job(), "--timeout", "1"], deadline: 1 },
      { args: [job(), "--config", config], deadline: 1 },
      { args: [job(2), "--timeout", "30"], deadline: 2 }, // the stage's own wins over the job-wide one
    ];
    for (const { args, deadline } of cases) {
      const started = Date.now();
      const ranks = await runRanks(2, [...args, "--out", dir]);
      const took = Date.now() - started;
      for (const p of ranks) {
        assert.equal(p.code, 1, p.stderr);
        assert.match(p.stderr, /stage work: deadline passed during 60 s of compute/, p.stderr);
      }
      assert.ok(took < deadline * 1000 + SLACK_MS, `${args.join(" ")}: took ${took} ms`);
      assert.ok(took >= deadline * 1000, `${args.join(" ")}: gave up after ${took} ms, before its deadline`);
    }
  }));

/** Under mpirun: waits for every rank to run, then does `fault` to rank `victim`'s process. */
function mpiFault(dir, { W, victim, timeoutSec, fault }) {
  const job = longJob(dir, timeoutSec);
  const found = {};
  const run = mpirun(W, [job, "--out", dir, "--log-level", "debug", "--log-all-ranks"], {
    timeoutMs: 90_000,
    onStarted: async (_child, stderr) => {
      while ((stderr().match(/running 3 stages/g) ?? []).length < W) await sleep(100);
      await sleep(300);
      found.ranks = Array.from({ length: W }, (_, r) => findProcesses(job, "OMPI_COMM_WORLD_RANK", String(r))[0]);
      found.at = Date.now();
      process.kill(found.ranks[victim], fault);
    },
  });
  return run.then((p) => ({ ...p, ranks: found.ranks, took: Date.now() - found.at }));
}

/** Stops rank W-1 under mpirun; the others' message must match `blamed`, and the job must end. */
async function stoppedUnderMpirun(W, blamed) {
  await withDir(async (dir) => {
    const timeoutSec = 3;
    const p = await mpiFault(dir, { W, victim: W - 1, timeoutSec, fault: "SIGSTOP" });
    try {
      assert.notEqual(p.code, 0);
      assert.ok(p.took < timeoutSec * 1000 + SLACK_MS, `the job took ${p.took} ms to end`);
      assert.match(p.stderr, blamed, p.stderr);
      assert.match(p.stderr, FLIGHT_RECORD);
      assert.deepEqual(await survivors(p.ranks), [], "rank processes left behind");
    } finally {
      for (const pid of p.ranks.filter(alive)) process.kill(pid, "SIGKILL");
    }
  });
}

// 3 ranks on 2 cores share cores: they run MPI's blocking collectives too, napping once the wait is long.
mpiTest("mpirun: a stopped rank (SIGSTOP) is named by the others' roll call at the deadline; the job ends", () =>
  stoppedUnderMpirun(3, /deadline passed while .*; holding up op #\d+ \([^)]+\): rank 2 did not answer/));

// 2 ranks on 2 cores: mpirun binds each to a core of its own, so they run MPI's blocking collectives,
// which only the watchdog can end.
mpiTest("mpirun, a core per rank: the watchdog ends the others' blocking MPI call at the deadline of a stopped rank (SIGSTOP), the roll call names it; the job ends", () =>
  stoppedUnderMpirun(2, /rank 0\): (stage \w+: )?deadline passed while waiting for MPI_(Allreduce|Gather|Barrier) of \d+ bytes; holding up op #\d+ \([^)]+\): rank 1 did not answer/));

mpiTest("mpirun: a rank stopped before MPI_Init: the others end at the connect deadline naming the MPI call they wait in", () =>
  withDir(async (dir) => {
    const W = 3, victim = 2, connectSec = 3;
    const config = path.join(dir, "run.json");
    writeFileSync(config, JSON.stringify({ connectTimeoutSec: connectSec }));
    const job = longJob(dir, 300);
    let stopped, stoppedAt;
    const p = await mpirun(W, [job, "--out", dir, "--config", config], {
      timeoutMs: 90_000,
      // Node takes a few hundred ms to start, so a rank caught as soon as it exists has not reached MPI_Init.
      onStarted: async () => {
        while (!(stopped = findProcesses(job, "OMPI_COMM_WORLD_RANK", String(victim))[0])) await sleep(5);
        process.kill(stopped, "SIGSTOP");
        stoppedAt = Date.now();
      },
    });
    try {
      const took = Date.now() - stoppedAt;
      assert.notEqual(p.code, 0);
      assert.ok(took < connectSec * 1000 + SLACK_MS, `the job took ${took} ms to end`);
      // mpirun ends the job once the first rank leaves, so another rank may not get to say it too.
      assert.match(p.stderr, /runner \(rank [01]\): mpi: MPI_Init_thread did not finish within 3 s; MPI names no missing rank before it is up/, p.stderr);
      assert.deepEqual(await survivors([stopped]), [], "the stopped rank is left behind");
    } finally {
      if (alive(stopped)) process.kill(stopped, "SIGKILL");
    }
  }));

mpiTest("mpirun: kill -9 of one rank ends mpirun non-zero within seconds, naming it; no rank is left", () =>
  withDir(async (dir) => {
    const p = await mpiFault(dir, { W: 3, victim: 1, timeoutSec: 300, fault: "SIGKILL" });
    assert.notEqual(p.code, 0);
    assert.ok(p.took < 15_000, `mpirun took ${p.took} ms to end`);
    assert.match(p.stderr, /process rank 1 with PID \d+ on node \S+ exited on signal 9/, p.stderr);
    assert.deepEqual(await survivors(p.ranks), [], "rank processes left behind");
    assert.ok(!alive(p.pid), "mpirun itself is gone");
    assert.deepEqual(shmLeftovers(p.ranks), []);
  }));
