// `runner compare`: ratios per row, exit 1 on a regression, 0 otherwise, 2 on unreadable input.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { RUNNER, runNode } from "./helpers/ranks.js";

const row = (stage, busbw, extra = {}) => ({
  stage, op: "allreduce", size: 4096, count: 1024, type: "float32", redop: "sum", root: null, algorithm: "ring",
  time: { avg_us: 4096 / (busbw * 1e3), p50_us: 0, p95_us: 0, min_us: 0, max_us: 0 },
  algbw: busbw, busbw, wrong: 0, wire_bytes: 0, rel_error: null, ...extra,
});
const doc = (results) => ({ version: "0", job: "j", world_size: 4, backend: "shm", results, average_bus_bandwidth: 0 });

function files(a, b) {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-compare-"));
  const fa = path.join(dir, "a.json"), fb = path.join(dir, "b.json");
  writeFileSync(fa, JSON.stringify(a));
  writeFileSync(fb, typeof b === "string" ? b : JSON.stringify(b));
  return { dir, fa, fb };
}

async function compare(a, b, ...flags) {
  const { dir, fa, fb } = files(a, b);
  try {
    return await runNode([RUNNER, "compare", fa, fb, ...flags]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("equal or faster rows pass with exit 0 and show the ratio", async () => {
  const p = await compare(doc([row("ar", 10), row("b", 2)]), doc([row("ar", 10.2), row("b", 2)]));
  assert.equal(p.code, 0, p.stdout + p.stderr);
  assert.match(p.stdout, /ar +allreduce +1024 +10\.00 +10\.20 .* 1\.020 +ok/);
  assert.match(p.stdout, /# 0 regressions \(threshold 5\.0%\)/);
});

test("a row slower than the threshold is a regression: exit 1", async () => {
  const p = await compare(doc([row("ar", 10)]), doc([row("ar", 8)]));
  assert.equal(p.code, 1);
  assert.match(p.stdout, /0\.800 +REGRESSION: 20\.0% slower/);
  const loose = await compare(doc([row("ar", 10)]), doc([row("ar", 8)]), "--threshold", "0.25");
  assert.equal(loose.code, 0, "within a 25% threshold");
});

test("wrong elements and missing rows are regressions", async () => {
  const wrong = await compare(doc([row("ar", 10)]), doc([row("ar", 10, { wrong: 3 })]));
  assert.equal(wrong.code, 1);
  assert.match(wrong.stdout, /REGRESSION: 3 wrong elements/);
  const missing = await compare(doc([row("ar", 10), row("gone", 1)]), doc([row("ar", 10)]));
  assert.equal(missing.code, 1);
  assert.match(missing.stdout, /gone .*REGRESSION: missing in the second run/);
});

test("unreadable or malformed result files: one line, exit 2", async () => {
  const garbage = await compare(doc([row("ar", 10)]), "{ not json");
  assert.equal(garbage.code, 2);
  assert.match(garbage.stderr, /^runner: .*b\.json: not a JSON result file\n$/);
  const shape = await compare(doc([row("ar", 10)]), { results: [{ stage: "x" }] });
  assert.equal(shape.code, 2);
  assert.match(shape.stderr, /b\.json: /);
  assert.equal(shape.stderr.trim().split("\n").length, 1);
});
