#!/usr/bin/env node
// Measures how much concurrent streams overlap on a shaped tcp link between network-namespace hosts and
// prints the Markdown table docs/PERFORMANCE.md records (docs/jobs.md, "Streams, groups and overlap"):
// 1. a link-bound all_gather on one stream beside a compute stage on another (2 hosts, 1 rank each);
// 2. tensor-parallel allreduce inside each host (shm) beside data-parallel allreduce across hosts (the shaped
//    tcp link): two groups whose links do not touch (2 hosts, 2 ranks each; split host / split across from
//    the topology the ranks found).
// Each is run on two streams and, for contrast, on one. Needs root.
//   node scripts/overlap-bench.mjs [--rate 1gbit] [--iterations 10] [--warmup 2]
import { readFileSync, rmSync } from "node:fs";
import { scriptArgs } from "./args.mjs";
import { prepareJob } from "../test/helpers/matrix.js";
import { netnsUnavailable, runSpread, withHosts } from "../test/helpers/netns.js";

const { values } = scriptArgs(import.meta.url, { rate: { type: "string", default: "1gbit" }, iterations: { type: "string", default: "10" }, warmup: { type: "string", default: "2" } });
const missing = netnsUnavailable();
if (missing) {
  console.error(`overlap-bench: ${missing}`);
  process.exit(2);
}
const common = { iterations: Number(values.iterations), warmup: Number(values.warmup) };

// A barrier on a second stream makes the single-stream run a graph too, so it reports the same figures.
const marker = (streams) => (streams ? [] : [{ id: "mark", op: "barrier", stream: "idle" }]);

const gatherBesideCompute = (streams) => ({
  name: "ag-compute", ...common,
  tensors: { w: { dtype: "float32", count: "1Mi" } },
  stages: [
    { id: "ag", op: "all_gather", input: "w", ...(streams && { stream: "comm" }) },
    { id: "compute", op: "compute", us: 30_000 },
    ...marker(streams),
  ],
});

const tpBesideDp = (streams) => ({
  name: "tp-dp", ...common,
  groups: { tp: { split: "host" }, dp: { split: "across" } },
  tensors: { act: { dtype: "float32", count: "4Mi" }, grad: { dtype: "float32", count: "1Mi" } },
  stages: [
    { id: "tp", op: "allreduce", input: "act", group: "tp", ...(streams && { stream: "tp" }) },
    { id: "dp", op: "allreduce", input: "grad", group: "dp", ...(streams && { stream: "dp" }) },
    ...marker(streams),
  ],
});

async function measure(job, hostCount, placement) {
  return withHosts(hostCount, async (hosts) => {
    const { dir, json, run } = prepareJob(placement.length, job, { launch: (_, args) => runSpread(hosts, placement, args, { timeoutMs: 600_000 }) });
    try {
      const ranks = await run();
      ranks.forEach((p, r) => {
        if (p.code !== 0) throw new Error(`rank ${r} exited ${p.code}: ${p.stderr}`);
      });
      const doc = JSON.parse(readFileSync(json, "utf8"));
      return { shaping: hosts.shaping, backend: doc.backend, graph: doc.results[0].graph };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, { shape: { rate: values.rate } });
}

const ms = (us) => (us / 1e3).toFixed(1);
const rows = [];
for (const [what, make, hostCount, placement] of [
  ["all_gather 4 MiB/rank beside 30 ms compute (2 hosts × 1 rank)", gatherBesideCompute, 2, [0, 1]],
  ["tp allreduce in hosts (shm) beside dp allreduce across (tcp) (2 hosts × 2 ranks)", tpBesideDp, 2, [0, 0, 1, 1]],
]) {
  for (const streams of [true, false]) {
    const { shaping, backend, graph } = await measure(make(streams), hostCount, placement);
    rows.push(`| ${what} | ${streams ? "2 streams" : "1 stream"} | ${backend} | ${ms(graph.solo_sum_us)} | ${ms(graph.solo_max_us)} | ${ms(graph.step_us)} | ${graph.overlap_pct.toFixed(0)} | ${graph.critical_path.join(" → ")} |`);
    if (rows.length === 1) console.log(`link: ${shaping}\n`);
  }
}
console.log("| stages | streams | backend | Σ solo (ms) | max solo (ms) | step (ms) | overlap % | critical path |");
console.log("|---|---|---|---:|---:|---:|---:|---|");
for (const row of rows) console.log(row);
