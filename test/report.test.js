// The run directory's writers: CSV, comms summary, and report.html, rendered in headless Chromium
// and checked not to be blank.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { PNG } from "pngjs";
import { RUNNER, runNode } from "./helpers/ranks.js";

const CHROMIUM = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => existsSync(p));

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
    assert.equal((html.match(/<svg /g) ?? []).length, 3, "bandwidth, error and overlap charts");
    assert.doesNotMatch(html, /<script|https?:\/\/(?!www\.w3\.org)/, "self-contained: no scripts, nothing fetched");
  } finally {
    rmSync(dir, { recursive: true, force: true });
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
    const png = path.join(dir, "report.png");
    const p = spawnSync(CHROMIUM, [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", `--user-data-dir=${path.join(dir, "profile")}`,
      "--window-size=1200,1400", `--screenshot=${png}`, `file://${path.join(run, "report.html")}`,
    ], { encoding: "utf8", timeout: 120_000 });
    assert.ok(existsSync(png), `no screenshot: ${p.stderr}`);
    const img = PNG.sync.read(readFileSync(png));
    let ink = 0, colour = 0;
    for (let i = 0; i < img.data.length; i += 4) {
      const [r, g, b] = [img.data[i], img.data[i + 1], img.data[i + 2]];
      if (r < 200 || g < 200 || b < 200) ink++;
      if (Math.max(r, g, b) - Math.min(r, g, b) > 60) colour++;
    }
    const pixels = img.width * img.height;
    assert.ok(ink / pixels > 0.01, `only ${(100 * ink / pixels).toFixed(2)}% of the page has ink`);
    assert.ok(colour > 500, `only ${colour} coloured pixels: the charts did not render`);
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
