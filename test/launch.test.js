import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { launch } from "../dist/launch/launcher.js";
import { freePort } from "../dist/launch/ports.js";
import { RankErrors } from "../dist/launch/rank-errors.js";
import { childrenOf, envOf, survivors } from "./helpers/procs.js";
import { spawnRunner } from "./helpers/ranks.js";
import { writeSlowSweep } from "./helpers/slow-sweep.js";

const T = { timeout: 30_000 };
const LAUNCHER_URL = new URL("../dist/launch/launcher.js", import.meta.url).href;

/** A rank program: node -e SOURCE. */
const rank = (source) => [process.execPath, "-e", source];

function collect() {
  const lines = [];
  return { lines, onLine: (r, stream, line) => lines.push({ rank: r, stream, line }) };
}

function assertGone(pid) {
  assert.throws(() => process.kill(pid, 0), { code: "ESRCH" }, `process ${pid} is still alive`);
}

/**
 * Runs launch() inside a separate node process (so its own stdout/stderr and signal
 * handling can be observed) and reports its output and result.
 */
function launcherProcess(options, { onStdout } = {}) {
  const script = `
    const { launch } = await import(${JSON.stringify(LAUNCHER_URL)});
    const result = await launch(JSON.parse(process.argv[1]));
    process.stdout.write("RESULT " + JSON.stringify(result) + "\\n");
    process.exitCode = result.exitCode;
  `;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script, JSON.stringify(options)], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (d) => {
    stdout += d;
    onStdout?.(stdout, child);
  });
  child.stderr.setEncoding("utf8").on("data", (d) => (stderr += d));
  const done = new Promise((resolve) =>
    child.on("close", (code, signal) => {
      // Not anchored to a line start: unprefixed rank output may lack a final newline.
      const m = /RESULT (\{.*\})\n/.exec(stdout);
      resolve({ code, signal, stdout, stderr, result: m && JSON.parse(m[1]) });
    }),
  );
  return { child, done };
}

test("all ranks exiting 0 gives exit code 0", T, async () => {
  const { lines, onLine } = collect();
  const result = await launch({ nprocs: 3, command: rank("console.log('hi from', process.env.RANK)"), onLine });
  assert.deepEqual(result, { exitCode: 0 });
  assert.deepEqual(lines.map((l) => l.line).sort(), ["hi from 0", "hi from 1", "hi from 2"]);
});

test("a failing rank takes the others down and is reported", T, async () => {
  // Every rank prints its pid once its handlers are installed; rank 2 then fails on cue,
  // rank 3 ignores SIGTERM (so it needs the SIGKILL), the rest sleep forever.
  const source = `
    const r = Number(process.env.RANK);
    if (r === 2) process.on("SIGUSR2", () => process.exit(3));
    if (r === 3) process.on("SIGTERM", () => console.log("ignoring SIGTERM"));
    setInterval(() => {}, 1000);
    console.log("pid " + process.pid);
  `;
  const pids = new Map();
  const lines = [];
  const t0 = Date.now();
  const result = await launch({
    nprocs: 4,
    command: rank(source),
    graceMs: 500,
    onLine: (r, _stream, line) => {
      lines.push(`${r}:${line}`);
      const m = /^pid (\d+)$/.exec(line);
      if (!m) return;
      pids.set(r, Number(m[1]));
      if (pids.size === 4) process.kill(pids.get(2), "SIGUSR2");
    },
  });
  assert.equal(result.exitCode, 3);
  assert.equal(result.failedRank, 2);
  assert.equal(result.message, "runner launch: rank 2 exited with code 3");
  assert.ok(lines.includes("3:ignoring SIGTERM"), lines.join("\n"));
  assert.ok(Date.now() - t0 < 15_000);
  for (const pid of pids.values()) assertGone(pid);
});

test("a rank killed by a signal is reported with 128+signal", T, async () => {
  const source = `
    if (process.env.RANK === "1") process.kill(process.pid, "SIGKILL");
    setInterval(() => {}, 1000);
  `;
  const result = await launch({ nprocs: 2, command: rank(source), onLine: () => {} });
  assert.deepEqual(result, { exitCode: 137, failedRank: 1, message: "runner launch: rank 1 was killed by SIGKILL", by: "rank 1 (SIGKILL)" });
});

// Issue 63 item 8: the first line names the rank that died or stopped answering, not the first of the ranks
// that gave up on it (they exit when their deadline passes, and a stopped rank never exits by itself).
test("the culprit first: a stopped rank, or one killed by another's signal, is named before the rank that exited first", T, async () => {
  const stops = `
    if (process.env.RANK === "1") process.kill(process.pid, "SIGSTOP");
    if (process.env.RANK === "2") setTimeout(() => process.exit(1), 300);
    setInterval(() => {}, 1000);
  `;
  const stopped = await launch({ nprocs: 3, command: rank(stops), graceMs: 300, settleMs: 300, onLine: () => {} });
  assert.deepEqual(stopped, {
    exitCode: 1, failedRank: 1, by: "rank 1 (stopped)",
    message: "runner launch: rank 1 stopped answering (its process was stopped, as by SIGSTOP); the others gave up waiting for it",
  });
  // Rank 0 notices first and exits; rank 1's death by SIGKILL, a moment later, is what the launch reports.
  const killed = `
    if (process.env.RANK === "0") process.exit(1);
    if (process.env.RANK === "1") setTimeout(() => process.kill(process.pid, "SIGKILL"), 100);
    setInterval(() => {}, 1000);
  `;
  const result = await launch({ nprocs: 3, command: rank(killed), settleMs: 1000, onLine: () => {} });
  assert.deepEqual(result, { exitCode: 137, failedRank: 1, message: "runner launch: rank 1 was killed by SIGKILL", by: "rank 1 (SIGKILL)" });
});

test("a command that cannot start is reported", T, async () => {
  const result = await launch({ nprocs: 2, command: ["/nonexistent/spmd-runner-rank"], onLine: () => {} });
  assert.equal(result.exitCode, 127);
  assert.match(result.message, /^runner launch: rank \d could not start: spawn \/nonexistent\/spmd-runner-rank ENOENT$/);
});

test("each rank gets its own torchrun-style environment", T, async () => {
  const vars = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT", "SPMD_RUNNER_TOKEN", "FROM_PARENT"];
  const source = `console.log(JSON.stringify(Object.fromEntries(${JSON.stringify(vars)}.map((k) => [k, process.env[k]]))))`;
  const run = async () => {
    const { lines, onLine } = collect();
    const result = await launch({ nprocs: 3, command: rank(source), env: { ...process.env, FROM_PARENT: "yes" }, onLine });
    assert.equal(result.exitCode, 0);
    return new Map(lines.map((l) => [l.rank, JSON.parse(l.line)]));
  };
  const envs = await run();
  assert.equal(envs.size, 3);
  const { MASTER_PORT: port, SPMD_RUNNER_TOKEN: token } = envs.get(0);
  assert.match(port, /^\d+$/);
  assert.match(token, /^[0-9a-f]{32}$/);
  for (const [r, env] of envs) {
    assert.deepEqual(env, {
      RANK: String(r),
      WORLD_SIZE: "3",
      LOCAL_RANK: String(r),
      LOCAL_WORLD_SIZE: "3",
      GROUP_RANK: "0",
      MASTER_ADDR: "127.0.0.1",
      MASTER_PORT: port,
      SPMD_RUNNER_TOKEN: token,
      FROM_PARENT: "yes",
    });
  }
  const again = await run();
  assert.notEqual(again.get(0).SPMD_RUNNER_TOKEN, token, "each launch must get a fresh token");
});

test("output is prefixed per rank, in order, with partial last lines flushed", T, async () => {
  const source = `
    const r = process.env.RANK;
    let out = "";
    for (let i = 0; i < 200; i++) out += "line " + i + "\\n";
    process.stdout.write(out);
    process.stderr.write("problem on " + r + "\\n");
    process.stdout.write("no newline at the end");
  `;
  const { done } = launcherProcess({ nprocs: 3, command: rank(source) });
  const { code, stdout, stderr, result } = await done;
  assert.equal(code, 0);
  assert.deepEqual(result, { exitCode: 0 });
  const lines = stdout.split("\n").filter((l) => !l.startsWith("RESULT "));
  for (const r of [0, 1, 2]) {
    const mine = lines.filter((l) => l.startsWith(`[${r}] `)).map((l) => l.slice(`[${r}] `.length));
    const expected = [...Array.from({ length: 200 }, (_, i) => `line ${i}`), "no newline at the end"];
    assert.deepEqual(mine, expected);
  }
  assert.deepEqual(stderr.trim().split("\n").sort(), ["[0] problem on 0", "[1] problem on 1", "[2] problem on 2"]);
  assert.ok(lines.every((l) => l === "" || /^\[\d\] /.test(l)));
});

test("without prefixing, output passes through unchanged", T, async () => {
  const source = `process.stdout.write("raw " + process.env.RANK + " no newline")`;
  const { done } = launcherProcess({ nprocs: 2, command: rank(source), prefixOutput: false });
  const { stdout, result } = await done;
  assert.deepEqual(result, { exitCode: 0 });
  const raw = stdout.slice(0, stdout.indexOf("RESULT "));
  assert.ok(raw === "raw 0 no newlineraw 1 no newline" || raw === "raw 1 no newlineraw 0 no newline", raw);
});

test("SIGTERM to the launcher is forwarded to every rank", T, async () => {
  const source = `
    process.on("SIGTERM", () => { console.log("got SIGTERM"); process.exit(0); });
    setInterval(() => {}, 1000);
    console.log("pid " + process.pid);
  `;
  let signalled = false;
  const { done } = launcherProcess(
    { nprocs: 3, command: rank(source), graceMs: 5000 },
    {
      onStdout: (stdout, launcher) => {
        if (!signalled && (stdout.match(/^\[\d\] pid \d+$/gm) ?? []).length === 3) {
          signalled = true;
          launcher.kill("SIGTERM");
        }
      },
    },
  );
  const { code, stdout, result } = await done;
  assert.ok(signalled, stdout);
  assert.deepEqual(result, { exitCode: 143, message: "runner launch: interrupted by SIGTERM" });
  assert.equal(code, 143);
  for (const r of [0, 1, 2]) assert.match(stdout, new RegExp(`^\\[${r}\\] got SIGTERM$`, "m"));
  for (const m of stdout.matchAll(/^\[\d\] pid (\d+)$/gm)) assertGone(Number(m[1]));
});

// `runner launch` of a real job, stopped by signals; rank 0's debug line that starts a sweep point says the
// points before it finished.
const pointStarted = (count) => new RegExp(`\\[rank 0\\] debug: running .* at \\{"count":${count},`);

async function withSweep(fn, { iterations = 3, logLevel = "debug" } = {}) {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-interrupt-"));
  try {
    const job = writeSlowSweep(dir, { iterations });
    const out = path.join(dir, "results");
    await fn(spawnRunner(["launch", "-n", "2", job, "--out", out, "--log-level", logLevel]), out);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("Ctrl-C during a sweep keeps the finished points, marked interrupted in results.json, the table and report.html", { timeout: 60_000 }, () =>
  withSweep(async (launcher, out) => {
    await launcher.seen(pointStarted(64));
    launcher.child.kill("SIGINT");
    const { code, stdout } = await launcher.exited;
    assert.equal(code, 130);
    const [run] = readdirSync(out);
    const doc = JSON.parse(readFileSync(path.join(out, run, "results.json"), "utf8"));
    assert.equal(doc.interrupted.signal, "SIGINT");
    assert.equal(doc.interrupted.by, "SIGINT");
    assert.equal(doc.interrupted.sweep_points, 4);
    assert.ok(!readdirSync(path.join(out, run)).includes("journal.jsonl"), "the journal goes once results.json holds it");
    const counts = doc.interrupted.finished.map((p) => p.count);
    assert.deepEqual(counts, [16, 32, 64, 128].slice(0, counts.length));
    assert.ok(counts.length >= 2 && counts.length < 4, `finished: ${counts}`);
    assert.deepEqual(doc.results.map((r) => r.count), counts.flatMap((c) => [c, 0]), "the rows are the finished points'");
    const line = `# Interrupted          : by SIGINT after ${counts.length} of 4 sweep points; the rows are those that finished`;
    assert.ok(stdout.includes(line), stdout);
    assert.ok(readFileSync(path.join(out, run, "table.txt"), "utf8").includes(line));
    assert.match(readFileSync(path.join(out, run, "report.html"), "utf8"), /<strong>Interrupted<\/strong> by SIGINT after \d of 4 sweep points/);
  }));

// Issue 63 item 6: rank 0 journals each point as it ends, and the launcher, which outlives every rank, finishes
// results.json from it when a rank dies, rank 0 included. Before: flight/ only, the finished points lost.
for (const victim of [1, 0]) {
  test(`kill -9 of rank ${victim} mid-sweep: results.json holds the finished points and names rank ${victim} and the point it died in`, { timeout: 60_000 }, () =>
    withSweep(async (launcher, out) => {
      await launcher.seen(pointStarted(64));
      process.kill(childrenOf(launcher.child.pid).find((pid) => envOf(pid, "RANK") === String(victim)), "SIGKILL");
      const { code, stdout, stderr } = await launcher.exited;
      assert.equal(code, 137, stderr);
      assert.match(stderr, new RegExp(`^runner launch: rank ${victim} was killed by SIGKILL$`, "m"));
      const [run] = readdirSync(out);
      assert.ok(!readdirSync(path.join(out, run)).includes("journal.jsonl"), "the journal goes once results.json holds it");
      const doc = JSON.parse(readFileSync(path.join(out, run, "results.json"), "utf8"));
      const { by, signal, finished, during, sweep_points } = doc.interrupted;
      assert.deepEqual({ by, signal, sweep_points }, { by: `rank ${victim} (SIGKILL)`, signal: undefined, sweep_points: 4 });
      const counts = finished.map((p) => p.count);
      assert.ok(counts.length >= 2 && counts.length < 4, `finished: ${counts}`);
      assert.deepEqual(counts, [16, 32, 64, 128].slice(0, counts.length));
      assert.deepEqual(during, { count: [16, 32, 64, 128][counts.length], params: {} });
      assert.deepEqual(doc.results.map((r) => r.count), counts.flatMap((c) => [c, 0]), "the rows are the finished points'");
      const line = `# Interrupted          : by rank ${victim} (SIGKILL) after ${counts.length} of 4 sweep points; the rows are those that finished`;
      assert.ok(stdout.includes(line), stdout);
      assert.ok(readFileSync(path.join(out, run, "table.txt"), "utf8").includes(line));
    }));
}

test("SIGTERM before any point finished leaves no run directory", { timeout: 60_000 }, () =>
  withSweep(async (launcher, out) => {
    await launcher.seen(pointStarted(16));
    launcher.child.kill("SIGTERM");
    const { code } = await launcher.exited;
    assert.equal(code, 143);
    assert.deepEqual(readdirSync(out), []);
  }));

test("SIGKILL of runner launch ends its ranks", { timeout: 60_000 }, () =>
  // 30 s of steps, and ranks that print nothing meanwhile: a broken pipe would end a rank that writes.
  withSweep(async (launcher) => {
    await launcher.seen(/\[rank 0\] info: job sweep: rank 0 of 2/);
    await new Promise((r) => setTimeout(r, 1000));
    const ranks = childrenOf(launcher.pid);
    assert.equal(ranks.length, 2);
    launcher.child.kill("SIGKILL");
    await launcher.exited;
    assert.deepEqual(await survivors(ranks), [], "ranks outlived their launcher");
  }, { iterations: 30, logLevel: "info" }));

test("rank errors under runner launch: each once with the ranks that gave it, details marked as one rank's unless all gave them", () => {
  const errors = new RankErrors();
  for (let rank = 0; rank < 16; rank++) assert.ok(errors.take(rank, `runner (rank ${rank}): --out /x: cannot write there: EROFS`));
  assert.deepEqual(errors.lines(), ["runner (ranks 0-15): --out /x: cannot write there: EROFS"]);

  const fault = new RankErrors();
  assert.equal(fault.take(0, "[rank 0] info: job long"), false, "not an error line: the caller prints it");
  assert.equal(fault.take(1, "runner (rank 0): someone else's line"), false);
  for (const [rank, cause, op] of [[3, "rank 2 died", 7], [1, "rank 3 aborted the job", 5], [0, "rank 3 aborted the job", 6]]) {
    fault.take(rank, `runner (rank ${rank}): ${cause}`);
    fault.take(rank, `runner (rank ${rank}):   in flight: #${op} allreduce`);
    fault.take(rank, `runner (rank ${rank}):   flight records: /r/flight/`);
  }
  assert.deepEqual(fault.lines(), [
    "runner (ranks 0,1): rank 3 aborted the job",
    "  in flight: #6 allreduce (rank 0)",
    "  flight records: /r/flight/",
    "runner (rank 3): rank 2 died",
    "  in flight: #7 allreduce",
    "  flight records: /r/flight/",
  ]);
});

test("rank 0's port comes from below the kernel's ephemeral range, where no outgoing connection can take it", async (t) => {
  let low;
  try {
    low = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
  } catch {
    return t.skip("no /proc/sys/net/ipv4/ip_local_port_range here");
  }
  for (let i = 0; i < 20; i++) {
    const port = await freePort("127.0.0.1");
    assert.ok(port >= 10000 && port < low, `port ${port} is not in [10000, ${low})`);
  }
});
