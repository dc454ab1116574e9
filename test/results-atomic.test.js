// Result files are written whole or not at all: a run killed part-way (while it runs, or while a file is
// being written) leaves the earlier run's directory and --json file exactly as they were, and parseable.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { freePort, rankEnv, runRanks, spawnRunner } from "./helpers/ranks.js";

const T = { timeout: 120_000 };
const WRITER = new URL("../dist/report/write-atomic.js", import.meta.url).href;

async function withDir(body) {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-atomic-"));
  try {
    await body(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Every file under `dir` with its bytes. */
function snapshot(dir) {
  const out = {};
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (entry.isFile()) out[path.relative(dir, path.join(entry.parentPath, entry.name))] = readFileSync(path.join(entry.parentPath, entry.name));
  }
  return out;
}

test("a run killed part-way leaves the earlier run's directory and --json file intact", T, () =>
  withDir(async (dir) => {
    const out = path.join(dir, "results"), json = path.join(dir, "latest.json");
    const job = (name, iterations) => {
      const file = path.join(dir, `${name}.json`);
      writeFileSync(file, JSON.stringify({ name, iterations, warmup: 0, tensors: { t: { dtype: "float32", count: "64Ki" } }, stages: [{ id: "ar", op: "allreduce", input: "t" }] }));
      return file;
    };
    const first = await runRanks(2, [job("first", 5), "--out", out, "--json", json, "--quiet"]);
    first.forEach((p) => assert.equal(p.code, 0, p.stderr));
    const before = snapshot(out), jsonBefore = readFileSync(json);
    assert.equal(Object.keys(before).filter((f) => f.endsWith("results.json")).length, 1);

    // The second run writes to the same places; both its ranks die while the steps run.
    const port = await freePort();
    const ranks = [0, 1].map((r) => spawnRunner([job("second", 1_000_000), "--out", out, "--json", json, "--log-level", "debug"], rankEnv(r, 2, port)));
    await ranks[0].seen(/running 1 stages/);
    for (const r of ranks) r.child.kill("SIGKILL");
    await Promise.all(ranks.map((r) => r.exited));

    const after = snapshot(out);
    for (const [file, bytes] of Object.entries(before)) assert.ok(after[file]?.equals(bytes), `${file} changed`);
    assert.deepEqual(Object.keys(after).filter((f) => !(f in before)), [], "the killed run wrote no result file");
    assert.ok(readFileSync(json).equals(jsonBefore), "--json file changed");
    assert.equal(JSON.parse(readFileSync(json, "utf8")).job, "first");
    for (const file of Object.keys(before).filter((f) => f.endsWith(".json"))) JSON.parse(before[file].toString());
  }));

test("a writer killed while writing leaves the old file or the whole new one, never a part", T, () =>
  withDir(async (dir) => {
    const target = path.join(dir, "result.json");
    writeFileSync(target, JSON.stringify({ generation: 0 }));
    // Rewrites the file with ever new 30 MB documents until killed.
    const source = `
      const { writeFileAtomic } = await import(${JSON.stringify(WRITER)});
      const pad = "x".repeat(30e6);
      for (let generation = 1; ; generation++) {
        writeFileAtomic(${JSON.stringify(target)}, JSON.stringify({ generation, pad }));
        process.stdout.write(generation + "\\n");
      }
    `;
    for (let round = 0; round < 8; round++) {
      const writer = spawn(process.execPath, ["--input-type=module", "-e", source]);
      await new Promise((resolve) => writer.stdout.once("data", resolve));
      await new Promise((resolve) => setTimeout(resolve, 37 * round)); // different points of the next write
      writer.kill("SIGKILL");
      await new Promise((resolve) => writer.on("close", resolve));
      const doc = JSON.parse(readFileSync(target, "utf8"));
      assert.ok(doc.generation >= 1, `generation ${doc.generation}`);
    }
  }));
