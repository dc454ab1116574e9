// What a rank reads at start-up (issue #21: 790 files of the package per rank, an import storm on a shared
// filesystem at 1000 ranks): the rank path is one bundled file (scripts/bundle.mjs), so a rank that writes
// no report opens a handful of the package's files and no plotting code; rank 0, which draws report.html,
// loads vega. Counted with strace; skipped where it is missing, except in CI.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { BUNDLE, loadBundle } from "../runner/bundle.js";
import { requiredTest } from "./helpers/required.js";
import { freePort, rankEnv, REPO, RUNNER } from "./helpers/ranks.js";

const straceTest = requiredTest("startup-cost.test.js", spawnSync("strace", ["-V"]).error ? "strace not found (apt-get install strace)" : undefined);

/** The package's files a traced process opened (successfully), relative to the package's root. */
function packageFiles(log) {
  const files = new Set();
  for (const m of readFileSync(log, "utf8").matchAll(/openat\([^,]+, "([^"]+)".*\) = \d+$/gm)) {
    const rel = path.relative(REPO, path.resolve(REPO, m[1]));
    if (!rel.startsWith("..")) files.add(rel);
  }
  return [...files];
}

function traced(log, args, env) {
  const child = spawn("strace", ["-f", "-e", "trace=openat", "-o", log, process.execPath, RUNNER, ...args], { cwd: REPO, env: { ...process.env, ...env } });
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  child.stdout.resume();
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, stderr })));
}

straceTest("a rank that writes no report opens at most 20 of the package's files and no plotting code; rank 0 draws", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-startup-"));
  try {
    const job = path.join(dir, "tiny.json");
    writeFileSync(job, JSON.stringify({ name: "tiny", iterations: 1, warmup: 0, tensors: { t: { dtype: "float32", count: 16 } }, stages: [{ id: "ar", op: "allreduce", input: "t" }] }));
    const port = await freePort();
    const ranks = await Promise.all([0, 1].map((r) => traced(path.join(dir, `trace${r}`), [job, "--out", dir, "--quiet"], rankEnv(r, 2, port))));
    ranks.forEach((p, r) => assert.equal(p.code, 0, `rank ${r}: ${p.stderr}`));
    const [rank0, rank1] = [0, 1].map((r) => packageFiles(path.join(dir, `trace${r}`)));
    const plotting = (files) => files.filter((f) => /node_modules\/(vega|d3-)/.test(f) || /charts\.c?js$/.test(f));
    assert.ok(rank1.length <= 20, `rank 1 opened ${rank1.length} files of the package:\n${rank1.join("\n")}`);
    assert.deepEqual(plotting(rank1), [], "rank 1 loads no plotting code");
    assert.ok(rank1.includes("dist/bundle/index.cjs") && rank1.includes("dist/bundle/index.cjs.v8cache"), "rank 1 runs the bundle, from its code cache");
    assert.ok(plotting(rank0).length > 0, "rank 0 draws report.html's charts");
    const version = path.join(dir, "version");
    assert.equal((await traced(version, ["--version"], {})).code, 0);
    assert.deepEqual(packageFiles(version).sort(), ["package.json", "runner/index.js"], "--version reads no code of ours but the entry");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the rank path compiles from the code cache the build wrote, and never from one made for other source", async () => {
  const built = loadBundle();
  assert.equal(built.cached, true, "dist/bundle/index.cjs.v8cache is missing or V8 rejected it");
  assert.equal(typeof built.exports.main, "function");
  // V8 itself checks only the source's length: an edited bundle of the same length keeps the old cache's
  // digest, which runner/bundle.js refuses; the bundle then compiles from its source.
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-cache-"));
  try {
    const edited = path.join(dir, "index.cjs");
    copyFileSync(path.join(REPO, "package.json"), path.join(dir, "package.json"));
    writeFileSync(edited, readFileSync(BUNDLE, "utf8").replace('"use strict";', "'use strict';"));
    copyFileSync(`${BUNDLE}.v8cache`, `${edited}.v8cache`);
    const loaded = loadBundle(edited);
    assert.equal(loaded.cached, false);
    assert.equal(typeof loaded.exports.main, "function");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("loading the rank path lays out no help: string-width's Intl.Segmenter is made at its first use, by --help", () => {
  const script = `
    let made = 0;
    Intl.Segmenter = class extends Intl.Segmenter { constructor(...a) { super(...a); made++; } };
    const { loadBundle } = await import(${JSON.stringify(new URL("../runner/bundle.js", import.meta.url).href)});
    const { main } = loadBundle().exports;
    console.log(made);
    await main(["--help"]);`;
  const p = spawnSync(process.execPath, ["--input-type=module", "-e", script], { cwd: REPO, encoding: "utf8" });
  assert.equal(p.status, 0, p.stderr);
  const [made, ...help] = p.stdout.split("\n");
  assert.equal(made, "0");
  assert.match(help.join("\n"), /Commands:\n\s+runner run <job>/);
});
