// DESIGN.md, "Security": a job that strangers on the node can neither join, read nor stall. Each attack of
// issue 43 against real ranks: a stranger (user nobody when the tests run as root, else another process of
// this user) forges a tcp Hello "from rank 0" to every new listener, under the key it can compute from the
// job's derived secret, and dials the store with the derived token. With a secret no one can derive (MPI's,
// or SPMD_RUNNER_TOKEN) the job ends rc 0 with 0 wrong and the stranger reads nothing; without one, rank 0
// says so once and results.json says "derived".
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { fingerprintDigest, keyFor } from "../dist/comm/secret.js";
import { StoreClient } from "../dist/comm/store.js";
import { fingerprint, jobSecret } from "../dist/run/identity.js";
import { resolveRun } from "../dist/run/request.js";
import { mpirun, mpiTest } from "./helpers/mpi.js";
import { freePort, REPO, RUNNER, rankEnv, runNode } from "./helpers/ranks.js";
import { withTempDir } from "./helpers/tmp.js";

const T = { timeout: 60_000 };
const JOB = {
  name: "secjob",
  iterations: 5,
  warmup: 1,
  check: true,
  tensors: { g: { dtype: "float32", count: "64Ki" } },
  stages: [{ id: "ar", op: "allreduce", input: "g" }, { id: "ag", op: "all_gather", input: "g" }],
};

function writeJob(dir) {
  const file = path.join(dir, "secjob.json");
  writeFileSync(file, JSON.stringify(JOB));
  return file;
}

/** Where results.json went under `out`, and what it says. */
function results(out) {
  const [run] = readdirSync(out);
  return JSON.parse(readFileSync(path.join(out, run, "results.json"), "utf8"));
}

/** As nobody when this runs as root (another user on the node), else as another process of this user. */
const AS_STRANGER = process.getuid?.() === 0 && !spawnSync("setpriv", ["--version"]).error ? ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] : [];

/** The stranger of helpers/stranger.mjs, forging under the key a derived secret gives `file` at `world` ranks. */
async function startStranger(file, world) {
  const { job, cfg } = resolveRun({ job: file, backend: "tcp" });
  const key = keyFor(jobSecret(job, world, {}), "tcp transport", fingerprintDigest(fingerprint(job, cfg))).toString("hex");
  const [program, ...args] = [...AS_STRANGER, process.execPath, path.join(REPO, "test/helpers/stranger.mjs"), key, String(world)];
  const child = spawn(program, args, { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  await new Promise((resolve, reject) => {
    child.stdout.on("data", () => out.startsWith("ready") && resolve());
    child.on("exit", (code) => reject(new Error(`the stranger exited (${code}) before it was ready`)));
  });
  return {
    /** Its forged Hellos so far: { port, lane, answered }. */
    stop: async () => {
      await new Promise((resolve) => setTimeout(resolve, 1100)); // the last Hellos' verdicts
      child.kill();
      return out.split("\n").slice(1).filter(Boolean).map((l) => JSON.parse(l));
    },
  };
}

/** Two ranks by hand, torchrun-style, on tcp; `env` on both. */
async function twoRanks(file, out, env) {
  const port = await freePort();
  const ranks = [0, 1].map((r) => runNode([RUNNER, file, "--backend", "tcp", "--out", out], { ...rankEnv(r, 2, port), SPMD_RUNNER_TOKEN: "", ...env }));
  return { port, ranks: await Promise.all(ranks) };
}

test("by hand without SPMD_RUNNER_TOKEN: one warning for the job naming SPMD_RUNNER_TOKEN, and results.json says \"derived\"", T, () =>
  withTempDir("spmd-sec-", async (dir) => {
    const out = path.join(dir, "out");
    const { ranks } = await twoRanks(writeJob(dir), out, {});
    for (const r of ranks) assert.equal(r.code, 0, r.stderr);
    const warnings = ranks.flatMap((r) => r.stderr.split("\n")).filter((l) => l.includes("SPMD_RUNNER_TOKEN"));
    assert.equal(warnings.length, 1, warnings.join("\n"));
    assert.match(warnings[0], /secret is derived from its name and size/);
    assert.equal(results(out).manifest.rendezvous_secret, "derived");
  }));

test("runner launch draws the secret: no warning, and results.json says \"random\"", T, () =>
  withTempDir("spmd-sec-", async (dir) => {
    const out = path.join(dir, "out");
    const run = await runNode([RUNNER, "launch", "-n", "2", writeJob(dir), "--backend", "tcp", "--out", out], { SPMD_RUNNER_TOKEN: "" });
    assert.equal(run.code, 0, run.stderr);
    assert.doesNotMatch(run.stderr, /SPMD_RUNNER_TOKEN/);
    assert.equal(results(out).manifest.rendezvous_secret, "random");
  }));

test("by hand with SPMD_RUNNER_TOKEN: a stranger with the derived secret gets no lane and reads nothing from the store; rc 0, 0 wrong, \"env\"", T, () =>
  withTempDir("spmd-sec-", async (dir) => {
    const file = writeJob(dir);
    const out = path.join(dir, "out");
    const stranger = await startStranger(file, 2);
    const port = await freePort();
    const ranks = [0, 1].map((r) => runNode([RUNNER, file, "--backend", "tcp", "--out", out], { ...rankEnv(r, 2, port), SPMD_RUNNER_TOKEN: "a-random-token-set-by-hand" }));
    const { job } = resolveRun({ job: file });
    await assert.rejects(
      StoreClient.connect({ host: "127.0.0.1", port, token: jobSecret(job, 2, {}).value, rank: 1, timeoutMs: 10_000 }),
      /rejected this rank: wrong job token/,
    );
    for (const r of await Promise.all(ranks)) assert.equal(r.code, 0, r.stderr);
    const forged = await stranger.stop();
    assert.ok(forged.some((f) => f.port !== port), `the stranger reached no rank's listener: ${JSON.stringify(forged)}`);
    assert.deepEqual(forged.filter((f) => f.answered), [], "a rank answered a forged Hello");
    const doc = results(out);
    assert.equal(doc.manifest.rendezvous_secret, "env");
    assert.ok(doc.results.every((row) => row.wrong === 0), JSON.stringify(doc.results.map((row) => row.wrong)));
  }));

mpiTest("under mpirun on tcp, a stranger forging a Hello to every listening port: rc 0, 0 wrong, and results.json says \"mpi\"", () =>
  withTempDir("spmd-sec-", async (dir) => {
    const file = writeJob(dir);
    const out = path.join(dir, "out");
    const stranger = await startStranger(file, 2);
    const run = await mpirun(2, [file, "--backend", "tcp", "--out", out], { timeoutMs: 60_000 });
    assert.equal(run.code, 0, run.stderr);
    const forged = await stranger.stop();
    assert.ok(forged.length > 0, "the stranger reached no listener");
    assert.deepEqual(forged.filter((f) => f.answered), [], "a rank answered a forged Hello");
    const doc = results(out);
    assert.equal(doc.manifest.rendezvous_secret, "mpi");
    assert.ok(doc.results.every((row) => row.wrong === 0));
  }), T);
