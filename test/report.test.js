// The run directory's writers: CSV, comms summary, and report.html, rendered in headless Chromium
// and checked not to be blank.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
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
    // The results are a table of the text table's columns, one row per result row; no text table in a <pre>.
    const body = html.match(/<table class="results">[\s\S]*?<\/table>/)?.[0] ?? "";
    assert.match(body, /<thead><tr><th class="l">stage<\/th><th class="l">op<\/th><th class="l">algo<\/th><th>size<\/th>/);
    assert.equal((body.match(/<tr>/g) ?? []).length - 1, doc.results.length, "a header row, then one row per result");
    assert.match(body, /<tr><td class="l">ar<\/td><td class="l">allreduce<\/td><td class="l">\w+<\/td><td>4096<\/td><td>1024<\/td>/);
    assert.doesNotMatch(html, /<pre>[^<]*# stage/, "no text table");
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

test("summary.txt labels a parameter sweep's rows as the table does, so rows of one op and size are told apart", async () => {
  const { formatSummary } = await import("../dist/report/summary.js");
  const time = { avg_us: 10, p50_us: 10, p95_us: 10, p99_us: 10, stddev_us: 0, min_us: 10, max_us: 10 };
  const row = (params) => ({ stage: "ar", op: "allreduce", size: 4096, count: 1024, type: "float32", redop: params["ar.reduce"] ?? "sum", root: null,
    algorithm: params.algorithm, time, algbw: 1, busbw: 1, wrong: 0, wire_bytes: 0, rel_error: null, per_rank_avg_us: [10, 10], slowest_rank: 0,
    straggler_us: 0, params });
  const points = [{ algorithm: "ring", "ar.reduce": "sum" }, { algorithm: "tree", "ar.reduce": "sum" }, { algorithm: "ring", "ar.reduce": "max" }];
  const summary = formatSummary({ version: "1", job: "j", world_size: 2, backend: "shm", results: points.map(row), average_bus_bandwidth: 1 }, 3);
  const [head, op, ...rows] = summary.split("\n");
  assert.match(head, /^Comm\. Op +Message Size/);
  assert.equal(op, "allreduce");
  const labels = ["ar[algorithm=ring,ar.reduce=sum]", "ar[algorithm=tree,ar.reduce=sum]", "ar[algorithm=ring,ar.reduce=max]"];
  const esc = (l) => l.replace(/[[\].]/g, "\\$&");
  for (const [i, l] of labels.entries()) {
    assert.match(rows[i], new RegExp(`^  ${esc(l)} +4 KiB +3 +`));
    assert.match(summary, new RegExp(`\nallreduce +${esc(l)} `), "its straggler row too");
  }
  assert.equal(rows[0].indexOf("4 KiB"), head.indexOf("Message Size"), "the columns stay aligned");
});

test("the relative-error legend and the overlap chart list sizes in numeric order", async () => {
  const { renderCharts } = await import("../dist/report/charts.js");
  const time = { avg_us: 10, p50_us: 10, p95_us: 10, p99_us: 10, stddev_us: 0, min_us: 10, max_us: 10 };
  const row = (count) => ({ stage: "ob", op: "compressed_allreduce", size: 4 * count, count, type: "float32", redop: "mean", root: null, algorithm: "onebit",
    time, algbw: 1, busbw: 1, wrong: null, wire_bytes: 0, rel_error: 0.1, rel_error_by_step: [0.3, 0.2, 0.1], per_rank_avg_us: [10], slowest_rank: 0, straggler_us: 0 });
  const svgs = await renderCharts([1024, 16384, 1048576].map(row));
  const legend = svgs.map((svg) => [...svg.matchAll(/>(ob @\d+: per step)</g)].map((m) => m[1])).find((l) => l.length);
  assert.deepEqual(legend, ["ob @1024: per step", "ob @16384: per step", "ob @1048576: per step"]);
  // The overlap chart's rows too.
  const overlap = { overall_us: 30, compute_us: 20, comm_us: 15, overlap_pct: 33.3 };
  const ig = await renderCharts([1024, 16384, 1048576].map((count) => ({ ...row(count), stage: "ig", op: "igather", rel_error_by_step: undefined, overlap })));
  const rows = ig.map((svg) => [...svg.matchAll(/>(ig @\d+)</g)].map((m) => m[1])).find((l) => l.length);
  assert.deepEqual(rows, ["ig @1024", "ig @16384", "ig @1048576"]);
});

test("the bandwidth chart of a parameter sweep: a line per combination of swept parameters, and a fallback algorithm said", async () => {
  const { renderCharts } = await import("../dist/report/charts.js");
  const time = { avg_us: 10, p50_us: 10, p95_us: 10, p99_us: 10, stddev_us: 0, min_us: 10, max_us: 10 };
  const row = (stage, op, count, params, algorithm) => ({ stage, op, size: 4 * count, count, type: "float32", redop: "sum", root: null, algorithm, params,
    time, algbw: 1, busbw: 1, wrong: 0, wire_bytes: 0, rel_error: null, per_rank_avg_us: [10], slowest_rank: 0, straggler_us: 0 });
  const rows = [1024, 16384].flatMap((count) => [
    row("ar", "allreduce", count, { reduce: "sum" }, "ring"), row("ar", "allreduce", count, { reduce: "max" }, "ring"),
    row("ag", "all_gather", count, { algorithm: "tree" }, "shared"), row("ag", "all_gather", count, { algorithm: "ring" }, "ring"),
  ]);
  const [bandwidth] = await renderCharts(rows);
  // One line each (main drew "ar (ring)" through sum and max alike, and "ag (shared)" beside "ag (ring)").
  const legend = [...bandwidth.matchAll(/>((?:ar|ag)\[[^<]*)</g)].map((m) => m[1]);
  assert.deepEqual(legend.sort(), ["ag[algorithm=ring] (ring)", "ag[algorithm=tree] (shared fallback)", "ar[reduce=max] (ring)", "ar[reduce=sum] (ring)"]);
});

/** Runs `script` in the page (headless Chromium) after it loads; returns what it wrote into <pre id="probe">. */
function probe(html, script, dir) {
  const page = path.join(dir, "probe.html");
  writeFileSync(page, html.replace("</body>", `<pre id="probe"></pre><script>document.getElementById("probe").textContent = (${script})();</script></body>`));
  const p = spawnSync(CHROMIUM, ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", `--user-data-dir=${path.join(dir, "profile")}`, "--window-size=1200,1400", "--dump-dom", `file://${page}`], { encoding: "utf8", timeout: 120_000 });
  return p.stdout.match(/<pre id="probe">([^<]*)<\/pre>/)?.[1] ?? `no probe: ${p.stderr}`;
}

// The timeline's labels, as Chromium lays them out: none runs into another or out of its bar's row of bars.
function labelOverlaps() {
  const chart = [...document.querySelectorAll("figure svg")].find((s) => s.textContent.includes("Step timeline by stream"));
  const labels = [...chart.querySelectorAll("g.mark-text.role-mark text")].filter((t) => t.textContent).map((t) => ({ text: t.textContent, box: t.getBoundingClientRect() }));
  const overlaps = [];
  for (const [i, a] of labels.entries())
    for (const b of labels.slice(i + 1))
      if (a.box.left < b.box.right && b.box.left < a.box.right && a.box.top < b.box.bottom && b.box.top < a.box.bottom) overlaps.push(`${a.text}/${b.text}`);
  return JSON.stringify({ labels: labels.length, overlaps });
}

test("report.html's timeline labels do not overlap in headless Chromium", async (t) => {
  if (!CHROMIUM) return t.skip("chromium not installed (apt-get install chromium)");
  const { renderCharts } = await import("../dist/report/charts.js");
  const time = (avg_us) => ({ avg_us, p50_us: avg_us, p95_us: avg_us, p99_us: avg_us, stddev_us: 0, min_us: avg_us, max_us: avg_us });
  // One step: a long stage on main, and on "side" a row of short stages whose names are longer than their bars.
  const graph = { step_us: 1000, solo_sum_us: 1500, solo_max_us: 1000, solo_steps: 5, overlap_pct: 50, critical_path: ["compute_forward"] };
  const stage = (id, stream, start_us, us) => ({ stage: id, op: "compute", size: 0, count: 0, type: null, redop: null, root: null, algorithm: "none",
    time: time(us), algbw: 0, busbw: 0, wrong: null, wire_bytes: 0, rel_error: null, per_rank_avg_us: [us], slowest_rank: 0, straggler_us: 0, stream, start_us, graph });
  const rows = [stage("compute_forward", "main", 0, 1000), ...Array.from({ length: 8 }, (_, i) => stage(`allgather_layer_${i}`, "side", 40 * i, 40))];
  const svgs = await renderCharts(rows);
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-timeline-"));
  try {
    const html = `<!doctype html><html><body>${svgs.map((s) => `<figure>${s}</figure>`).join("")}</body></html>`;
    const { labels, overlaps } = JSON.parse(probe(html, labelOverlaps.toString(), dir));
    assert.ok(labels >= 1, "the long bar keeps its label");
    assert.deepEqual(overlaps, []);
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
