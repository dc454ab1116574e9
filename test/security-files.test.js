// DESIGN.md, "Security", files (issue 63 items 2, 3, 4, 7; issue 64 item 5): what the runner writes cannot be
// redirected or taken over by what a stranger planted in a shared folder; values that reach a batch script
// hold no control characters; an input that is a device, a FIFO or too large is one line, exit 2, at once;
// a campaign repetition whose results were spoiled after it ended runs again. The stranger is user nobody
// where the tests run as root (else this user, which still checks links and modes, not owners).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, closeSync, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, truncateSync, writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { loadJob, loadRunConfig } from "../dist/config/load.js";
import { loadExperiment } from "../dist/exp/file.js";
import { loadResults } from "../dist/report/compare.js";
import { writeFileAtomic } from "../dist/report/write-atomic.js";
import { REPO, RUNNER, runNode } from "./helpers/ranks.js";
import { withTempDir } from "./helpers/tmp.js";

const T = { timeout: 60_000 };
const root = process.getuid?.() === 0;
const AS_STRANGER = root && !spawnSync("setpriv", ["--version"]).error ? ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] : [];

/** Runs `script` in sh as the stranger, in `dir`. */
function asStranger(dir, script) {
  const [program, ...args] = [...AS_STRANGER, "sh", "-c", script];
  const p = spawnSync(program, args, { cwd: dir, encoding: "utf8" });
  assert.equal(p.status, 0, p.stderr);
}

/** A folder anyone may write in, as /tmp is. */
function sharedFolder(dir) {
  const pub = path.join(dir, "pub");
  mkdirSync(pub);
  chmodSync(pub, 0o1777);
  return pub;
}

/** One line on stderr, nothing else said, exit 2, within `ms`. */
function assertRefused(p, ms, pattern, what) {
  assert.equal(p.code, 2, `${what}: exit ${p.code} (${p.signal ?? ""}) ${p.stderr}`);
  assert.ok(p.ms < ms, `${what}: ${p.ms} ms`);
  assert.match(p.stderr, pattern, what);
  assert.equal(p.stderr.trim().split("\n").length, 1, `${what}: ${p.stderr}`);
}

/** `body()` with `env` set in this process's environment, as it was afterwards. */
function withEnv(env, body) {
  const before = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  try {
    return body();
  } finally {
    for (const [k, v] of Object.entries(before)) if (v === undefined) delete process.env[k]; else process.env[k] = v;
  }
}

async function timed(args, env) {
  const start = Date.now();
  const p = await runNode(args, env, 12_000); // past the 10 s any refusal must take: a read that never ends is killed
  return { ...p, ms: Date.now() - start };
}

test("links and files planted at the writer's old temporary names and at the target change nothing but the result", T, () =>
  withTempDir("spmd-plant-", async (dir) => {
    chmodSync(dir, 0o755);
    const pub = sharedFolder(dir);
    const victim = path.join(dir, "victim");
    writeFileSync(victim, "secret\n", { mode: 0o600 });
    // The names this process's writer used (FILE.PID.tmp), a link at the target, and the stranger's folder link.
    asStranger(pub, [
      `ln -s ${victim} step.json.${process.pid}.tmp`, `ln -s ${victim} linked.json`,
      `: > r.json.${process.pid}.tmp`, `chmod 666 r.json.${process.pid}.tmp`, `ln -s ${dir} sub`,
    ].join("; "));
    for (const name of ["step.json", "linked.json", "r.json"]) writeFileAtomic(path.join(pub, name), `${name}\n`);

    assert.equal(readFileSync(victim, "utf8"), "secret\n", "the planted links were written through");
    const mode = 0o666 & ~process.umask() & 0o644;
    for (const name of ["step.json", "linked.json", "r.json"]) {
      const s = lstatSync(path.join(pub, name));
      assert.ok(s.isFile(), `${name} is a regular file, not a link`);
      assert.equal(s.uid, process.getuid(), `${name} is ours`);
      assert.equal(s.mode & 0o777, mode, `${name}'s mode`);
      assert.equal(readFileSync(path.join(pub, name), "utf8"), `${name}\n`);
    }
    if (root) {
      // A folder link of the stranger's on the way is refused, not followed.
      assert.throws(() => writeFileAtomic(path.join(pub, "sub", "x.json"), "x"), { exitCode: 2, message: /sub: it is a link of uid 65534/ });
      assert.deepEqual(readdirSync(dir).sort(), ["pub", "victim"]);
    }
  }));

test("an output path that cannot be written: one line naming it, exit 2", T, async () => {
  const p = await timed([RUNNER, "trace", "import", path.join(REPO, "traces/resnet-ddp-2rank.et.json.gz"), "-o", "/proc/x.json"]);
  assertRefused(p, 10_000, /^runner: cannot write \/proc\/x\.json: ENOENT: no such file or directory\n$/, "-o /proc/x.json");
});

test("an experiment value with a control character that would reach the sbatch script is refused at plan, exit 2 naming the key", T, () =>
  withTempDir("spmd-sbatch-", async (dir) => {
    writeFileSync(path.join(dir, "j.json"), JSON.stringify({ name: "j", tensors: { t: { dtype: "float32", count: 4 } }, stages: [{ id: "ar", op: "allreduce", input: "t" }] }));
    const cases = [
      ["executor.partition", { kind: "slurm", partition: "gpu\ntouch pwned" }, {}],
      ["executor.sbatch[1]", { kind: "slurm", sbatch: ["--account=a", "--qos=x\r#"] }, {}],
      ['matrix.variant.base.env.X', { kind: "slurm" }, { X: "a\u0000b" }],
    ];
    await Promise.all(cases.map(async ([key, executor, env], k) => {
      const file = path.join(dir, `e${k}.json`);
      writeFileSync(file, JSON.stringify({ name: "e", jobs: ["j.json"], matrix: { world_size: [2], variant: { base: { env } } }, executor }, null, 2));
      const p = await timed([RUNNER, "exp", "run", "--dry-run", file, "--dir", path.join(dir, "c")]);
      assertRefused(p, 10_000, new RegExp(`line \\d+ column \\d+: ${key.replace(/[.[\]]/g, "\\$&")}: expected text without control characters`), key);
      assert.equal(p.stdout, "", `${key}: nothing printed`);
    }));
  }));

test("input files that are devices, FIFOs or larger than the cap: one line, exit 2, in under 10 s, for every command that reads one", T, () =>
  withTempDir("spmd-inputs-", async (dir) => {
    const fifo = path.join(dir, "fifo.json");
    spawnSync("mkfifo", [fifo]);
    const big = path.join(dir, "big.json");
    closeSync(openSync(big, "w"));
    truncateSync(big, 64 * 1024 ** 2 + 1); // sparse: costs no disk
    const why = new Map([["/dev/urandom", "not a regular file \\(a character device\\)"], ["/dev/zero", "not a regular file \\(a character device\\)"], [fifo, "not a regular file \\(a FIFO\\)"], [big, "larger than 64 MiB .*SPMD_RUNNER_MAX_INPUT"]]);
    const refusal = (file, prefix = "") => new RegExp(`^${prefix}${file.replace(/[.]/g, "\\.")}: ${why.get(file)}`);
    // Every command that reads an input, each with one of them: the loaders are what they call.
    const job = path.join(REPO, "jobs/quickstart.json");
    const commands = [
      ["validate", "/dev/urandom", (f) => ["validate", f]],
      ["run --config", "/dev/zero", (f) => [job, "--config", f]],
      ["exp plan", fifo, (f) => ["exp", "plan", f]],
      ["trace export", big, (f) => ["trace", "export", f, "--world", "2", "-o", path.join(dir, "out")]],
      ["compare", fifo, (f) => ["compare", f, "--", f]],
    ];
    await Promise.all(commands.map(async ([what, file, args]) => {
      const p = await timed([RUNNER, ...args(file)]);
      assertRefused(p, 10_000, refusal(file, "runner: "), `${what} ${file}`);
    }));
    // Every loader, each input, in this process (after the commands, which have a timeout where a read never ends).
    for (const file of why.keys()) {
      for (const load of [loadJob, loadRunConfig, loadExperiment, loadResults]) {
        const start = Date.now();
        assert.throws(() => load(file), { exitCode: 2, message: refusal(file) }, `${load.name} ${file}`);
        assert.ok(Date.now() - start < 1000, `${load.name} ${file}: ${Date.now() - start} ms`);
      }
    }
    // The cap is the environment's to raise: the same file then reads (and is refused as JSON, not for its size).
    assert.throws(() => withEnv({ SPMD_RUNNER_MAX_INPUT: "65Mi" }, () => loadJob(big)), { exitCode: 2, message: /invalid JSON/ });
  }));

test("a campaign repetition whose results were spoiled after it ended: exp status names it, exp run runs it again", { timeout: 120_000 }, () =>
  withTempDir("spmd-spoiled-", async (dir) => {
    writeFileSync(path.join(dir, "j.json"), JSON.stringify({ name: "j", iterations: 1, warmup: 0, tensors: { t: { dtype: "float32", count: 4 } }, stages: [{ id: "ar", op: "allreduce", input: "t" }] }));
    const exp = path.join(dir, "e.json"), camp = path.join(dir, "c");
    writeFileSync(exp, JSON.stringify({ name: "e", jobs: ["j.json"], matrix: { world_size: [1] }, repetitions: 2 }));
    const first = await runNode([RUNNER, "exp", "run", exp, "--dir", camp, "--quiet"]);
    assert.equal(first.code, 0, first.stderr);
    const [id] = readdirSync(path.join(camp, "points"));
    const results = (rep) => path.join(camp, "points", id, `rep-${rep}`, "results.json");
    const kept = readFileSync(results(1));
    writeFileSync(results(2), "garbage\n");

    const status = await runNode([RUNNER, "exp", "status", "--dir", camp]);
    assert.equal(status.code, 0, status.stderr);
    assert.match(status.stdout, new RegExp(`${id}  pending +1/2 reps .*spoiled: rep 2 marked done but its results\\.json is gone or changed`));
    const again = await runNode([RUNNER, "exp", "run", exp, "--dir", camp]);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stderr, /exp: 1 repetition to run of 1 points/);
    assert.ok(readFileSync(results(1)).equals(kept), "the intact repetition was not run again");
    assert.equal(JSON.parse(readFileSync(results(2), "utf8")).job, "j");
    const rows = await runNode([RUNNER, "exp", "query", "SELECT rep, count(*) AS n FROM rows GROUP BY rep", "--dir", camp, "--format", "json"]);
    assert.deepEqual(JSON.parse(rows.stdout), [{ rep: 1, n: 1 }, { rep: 2, n: 1 }]);
  }));
