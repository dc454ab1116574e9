// Where the 1-bit compressed allreduce overtakes the exact one on a shaped link: jobs/onebit.json (exact
// mean allreduce and compressed_allreduce over a sweep of sizes) on two hosts, one rank each, whose links
// are shaped (helpers/netns.js). Used by test/shaped-link.test.js and scripts/onebit-crossover.mjs.
import { readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { prepareJob } from "./matrix.js";
import { runSpread, withHosts } from "./netns.js";
import { REPO } from "./ranks.js";

/**
 * Runs the sweep and returns { shaping, rows: [{ count, bytes, exact_us, onebit_us, rel_error }], crossover }
 * where crossover is the smallest count from which on the compressed stage is faster at every larger size.
 */
export async function measureCrossover({ rate = "1gbit", delay = "1ms", to, iterations, warmup, timeoutMs = 300_000 } = {}) {
  const job = JSON.parse(readFileSync(path.join(REPO, "jobs/onebit.json"), "utf8"));
  delete job.$schema;
  if (to !== undefined) job.sweep.count.to = to;
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

/** The result as a Markdown table. */
export function crossoverTable({ rows, crossover }) {
  const lines = [
    "| count (float32) | bytes | exact allreduce (µs) | compressed_allreduce (µs) | compressed / exact | rel. error |",
    "|---:|---:|---:|---:|---:|---:|",
  ];
  for (const r of rows) {
    const mark = r.count === crossover ? " ← crossover" : "";
    lines.push(`| ${human(r.count)} | ${human(r.bytes)}B | ${r.exact_us.toFixed(0)} | ${r.onebit_us.toFixed(0)} | ${(r.onebit_us / r.exact_us).toFixed(2)}${mark} | ${r.rel_error?.toExponential(2) ?? "n/a"} |`);
  }
  return lines.join("\n");
}
