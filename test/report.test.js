// The run directory's writers: CSV, comms summary, and report.html, rendered in headless Chromium
// and checked not to be blank.
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { formatCsv } from "../dist/report/csv.js";
import { assertRenders, CHROMIUM } from "./helpers/chromium.js";
import { RUNNER, runNode } from "./helpers/ranks.js";


const job = {
  name: "report", iterations: 3, warmup: 1, check: true,
  tensors: { g: { dtype: "float32", count: 1024 } },
  stages: [
    { id: "ar", op: "allreduce", input: "g" },
    { id: "ob", op: "compressed_allreduce", input: "g" },
    { id: "ig", op: "igather", input: "g" },
    { id: "work", op: "compute", us: 300 },
    { id: "done", op: "barrier", after: ["ig", "work"] },
  ],
  sweep: { count: { from: "1Ki", to: "64Ki", factor: 8 } },
};

async function runReport() {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-report-"));
  const file = path.join(dir, "job.json");
  writeFileSync(file, JSON.stringify(job));
  const p = await runNode([RUNNER, "launch", "-n", "2", file, "--out", dir, "--quiet"]);
  assert.equal(p.code, 0, p.stderr);
  const run = readdirSync(dir).find((d) => d.startsWith("report-"));
  return { dir, run: path.join(dir, run) };
}

test("each run directory holds the table, JSON, CSV, comms summary and HTML report", async () => {
  const { dir, run } = await runReport();
  try {
    assert.deepEqual(readdirSync(run).sort(), ["report.html", "results.csv", "results.json", "summary.txt", "table.txt"]);
    const doc = JSON.parse(readFileSync(path.join(run, "results.json"), "utf8"));
    assert.equal(doc.results.length, 5 * 3, "one row per stage and sweep point");
    const ig = doc.results.find((r) => r.stage === "ig");
    assert.deepEqual(Object.keys(ig.overlap), ["overall_us", "compute_us", "comm_us", "overlap_pct"]);
    assert.ok(ig.overlap.overlap_pct >= 0 && ig.overlap.overlap_pct <= 100);
    for (const r of doc.results) {
      assert.equal(r.per_rank_avg_us.length, 2);
      assert.ok(r.straggler_us >= 0 && r.straggler_us === r.per_rank_avg_us[r.slowest_rank] - Math.min(...r.per_rank_avg_us));
    }
    const summary = readFileSync(path.join(run, "summary.txt"), "utf8");
    assert.match(summary, /^Comm\. Op +Message Size +Count +Total Latency\(ms\) +Avg Latency\(ms\)/);
    assert.match(summary, /\nallreduce\n +4 KiB +3 +/);
    assert.match(summary, /\nStragglers +Stage/);
    assert.match(summary, /\nOverlap \(OSU\) +Stage +Count +Overall\(ms\) +Compute\(ms\) +Comm\(ms\) +Overlap\(%\)\nigather +ig +2048 +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+/);
    const html = readFileSync(path.join(run, "report.html"), "utf8");
    // igather runs on a stream of its own, so each point's step also has a timeline.
    assert.equal((html.match(/<svg /g) ?? []).length, 4, "bandwidth, error, overlap and step timeline charts");
    assert.match(html, /Step timeline by stream/);
    assert.ok(doc.results.every((r) => r.graph && r.graph.critical_path.at(-1) === "done"), "every point's graph ends at the barrier");
    assert.doesNotMatch(html, /<script|https?:\/\/(?!www\.w3\.org)/, "self-contained: no scripts, nothing fetched");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** RFC 4180 records: quoted cells may hold commas, quotes ("") and line breaks. */
function parseCsv(text) {
  const records = [[]];
  let cell = "", quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') cell += text[++i];
      else if (c === '"') quoted = false;
      else cell += c;
    } else if (c === '"') quoted = true;
    else if (c === ",") records.at(-1).push(cell), (cell = "");
    else if (c === "\n") records.at(-1).push(cell), (cell = ""), records.push([]);
    else cell += c;
  }
  records.pop();
  return records;
}

test("the CSV carries every field of every row: sweep params, fallback, per-rank times, overlap", () => {
  const time = { avg_us: 10, p50_us: 9, p95_us: 12, p99_us: 13, stddev_us: 1.5, min_us: 8, max_us: 13 };
  const base = { op: "quantized_allreduce", size: 4096, count: 1024, type: "float32", redop: "sum", root: null, algorithm: "shared", time,
    algbw: 1, busbw: 2, wrong: null, wire_bytes: 512, rel_error: 0.01, per_rank_avg_us: [9.5, 10.5], slowest_rank: 1, straggler_us: 1 };
  const rows = [
    { ...base, stage: "q", params: { bits: 4, note: 'a "b", c' }, fallback: null, rel_error_by_step: [0.1, null, 0.02] },
    { ...base, stage: "q", params: { bits: 8 }, fallback: "count not a multiple of 2W", wrong: 0, rel_error: null },
    { ...base, stage: "ig", op: "igather", overlap: { overall_us: 30, compute_us: 20, comm_us: 15, overlap_pct: 33.3 } },
  ];
  const [header, ...records] = parseCsv(formatCsv({ version: "1", job: "j", world_size: 2, backend: "shm", results: rows, average_bus_bandwidth: 2 }));
  assert.deepEqual(header.slice(0, 20), ["stage", "op", "size", "count", "type", "redop", "root", "algorithm", "avg_us", "p50_us", "p95_us",
    "p99_us", "stddev_us", "min_us", "max_us", "algbw", "busbw", "wrong", "wire_bytes", "rel_error"]);
  assert.equal(new Set(header).size, header.length, "each column once");
  const at = (r, column) => records[r][header.indexOf(column)];
  assert.deepEqual([at(0, "params.bits"), at(1, "params.bits"), at(2, "params.bits")], ["4", "8", ""], "sweep points apart");
  assert.equal(at(0, "params.note"), 'a "b", c');
  assert.deepEqual([at(0, "fallback"), at(1, "fallback")], ["", "count not a multiple of 2W"]);
  assert.equal(at(1, "wrong"), "0");
  assert.equal(at(0, "per_rank_avg_us"), "9.5;10.5");
  assert.deepEqual([at(0, "slowest_rank"), at(0, "straggler_us")], ["1", "1"]);
  assert.equal(at(0, "rel_error_by_step"), "0.1;;0.02");
  assert.equal(at(2, "overlap.overlap_pct"), "33.3");
  // Every scalar leaf of every row has a column holding it.
  for (const [r, row] of rows.entries()) {
    for (const [key, v] of Object.entries(row)) {
      if (v === null || typeof v !== "object") assert.equal(at(r, key), v === null ? "" : String(v), key);
      else if (!Array.isArray(v)) for (const [k, x] of Object.entries(v)) assert.equal(at(r, key === "time" ? k : `${key}.${k}`), String(x), k);
    }
  }
});

test("report.html renders in headless Chromium to a picture that is not blank", async (t) => {
  if (!CHROMIUM) {
    if (process.env.CI) assert.fail("chromium is required in CI (.ci/run installs it)");
    t.skip("chromium not installed (apt-get install chromium)");
    return;
  }
  const { dir, run } = await runReport();
  try {
    assertRenders(path.join(run, "report.html"), dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("progress: rank 0 reports steps to the launcher's side channel; piped output shows no bar", async () => {
  const { launch } = await import("../dist/launch/launcher.js");
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-progress-"));
  try {
    const file = path.join(dir, "job.json");
    writeFileSync(file, JSON.stringify({ name: "p", iterations: 30, warmup: 2, tensors: { t: { dtype: "float32", count: 4096 } }, stages: [{ id: "ar", op: "allreduce", input: "t" }], sweep: { count: [1024, 4096] } }));
    const seen = [];
    const lines = [];
    const result = await launch({
      nprocs: 2,
      command: [process.execPath, RUNNER, "run", file, "--out", dir],
      onProgress: (done, total) => seen.push([done, total]),
      onLine: (rank, stream, line) => lines.push(line),
    });
    assert.equal(result.exitCode, 0, lines.join("\n"));
    assert.ok(seen.length > 0, "no progress reported");
    assert.ok(seen.every(([d, t]) => t === 64 && d >= 0 && d <= 64), JSON.stringify(seen));
    assert.ok(!lines.some((l) => /steps \[/.test(l)), "no bar drawn by ranks whose output is piped");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
