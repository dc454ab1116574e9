// Where the 1-bit compressed allreduce overtakes the exact one on a shaped link: jobs/onebit.json (exact
// mean allreduce and compressed_allreduce over a sweep of sizes) on two hosts, one rank each, whose links
// are shaped (helpers/netns.js). Used by test/shaped-link.test.js and scripts/onebit-crossover.mjs.
import { readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { prepareJob } from "./matrix.js";
import { runSpread, withHosts } from "./netns.js";
import { REPO } from "./ranks.js";

// The qgZ int4 allreduce the targets name (#44): mean, every rank gets the full result.
const QGZ_INT4 = { id: "qgz_int4", op: "quantized_allreduce", input: "grad", bits: 4, reduce: "mean", output: "full" };

/**
 * Runs the sweep and returns { shaping, rows: [{ count, bytes, exact_us, onebit_us, rel_error }], crossover }
 * where crossover is the smallest count from which on the compressed stage is faster at every larger size.
 * `quantized`: the sweep also runs qgZ int4 (rows gain qgz_us and qgz_error), which jobs/onebit.json leaves
 * out to keep CI's shaped-link test short.
 */
export async function measureCrossover({ rate = "1gbit", delay = "1ms", from, to, iterations, warmup, quantized = false, timeoutMs = 300_000 } = {}) {
  const job = JSON.parse(readFileSync(path.join(REPO, "jobs/onebit.json"), "utf8"));
  delete job.$schema;
  if (from !== undefined) job.sweep.count.from = from;
  if (to !== undefined) job.sweep.count.to = to;
  if (quantized) job.stages.push(QGZ_INT4);
  if (iterations !== undefined) job.iterations = iterations;
  if (warmup !== undefined) job.warmup = warmup;
  return withHosts(2, async (hosts) => {
    const { dir, json, run } = prepareJob(2, job, { launch: (_, args) => runSpread(hosts, [0, 1], args, { timeoutMs }) });
    let doc;
    try {
      const ranks = await run();
      ranks.forEach((p, r) => {
        if (p.code !== 0) throw new Error(`rank ${r} exited ${p.code}: ${p.stderr}`);
      });
      doc = JSON.parse(readFileSync(json, "utf8"));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const byCount = new Map();
    for (const r of doc.results) {
      const row = byCount.get(r.count) ?? { count: r.count, bytes: r.size };
      if (r.stage === "exact") row.exact_us = r.time.avg_us;
      else if (r.stage === QGZ_INT4.id) Object.assign(row, { qgz_us: r.time.avg_us, qgz_error: r.rel_error });
      else Object.assign(row, { onebit_us: r.time.avg_us, rel_error: r.rel_error });
      byCount.set(r.count, row);
    }
    const rows = [...byCount.values()].sort((a, b) => a.count - b.count);
    let crossover;
    for (let i = rows.length - 1; i >= 0 && rows[i].onebit_us < rows[i].exact_us; i--) crossover = rows[i].count;
    return { shaping: hosts.shaping, backend: doc.backend, rows, crossover };
  }, { shape: { rate, delay } });
}

const human = (n) => (n >= 2 ** 20 ? `${n / 2 ** 20} Mi` : n >= 1024 ? `${n / 1024} Ki` : String(n));

const error = (e) => e?.toExponential(2) ?? "n/a";

/** The result as a Markdown table (with qgZ int4's columns where the sweep ran it). */
export function crossoverTable({ rows, crossover }) {
  const qgz = rows.some((r) => r.qgz_us !== undefined);
  const lines = [
    "| count (float32) | bytes | exact allreduce (µs) | compressed_allreduce (µs) | compressed / exact | rel. error |" +
      (qgz ? " qgZ int4 full (µs) | qgZ / exact | qgZ rel. error |" : ""),
    "|---:|---:|---:|---:|---:|---:|" + (qgz ? "---:|---:|---:|" : ""),
  ];
  for (const r of rows) {
    const mark = r.count === crossover ? " ← crossover" : "";
    let line = `| ${human(r.count)} | ${human(r.bytes)}B | ${r.exact_us.toFixed(0)} | ${r.onebit_us.toFixed(0)} | ${(r.onebit_us / r.exact_us).toFixed(2)}${mark} | ${error(r.rel_error)} |`;
    if (qgz) line += ` ${r.qgz_us?.toFixed(0) ?? "n/a"} | ${r.qgz_us === undefined ? "n/a" : (r.qgz_us / r.exact_us).toFixed(3)} | ${error(r.qgz_error)} |`;
    lines.push(line);
  }
  return lines.join("\n");
}
