#!/usr/bin/env node
// Measures where compressed_allreduce overtakes the exact allreduce on a shaped link and prints the
// Markdown table that docs/PERFORMANCE.md records: jobs/onebit.json on two hosts (network namespaces,
// one rank each) whose egress is shaped to RATE, plus DELAY where the kernel has sch_netem. Needs root.
//   node scripts/onebit-crossover.mjs [--rate 1gbit] [--delay 1ms] [--from 4Mi] [--to 16Mi] [--iterations N] [--warmup N] [--quantized]
// --quantized adds qgZ int4 (mean, full output) to the sweep, with its time against the exact allreduce's.
import { scriptArgs } from "./args.mjs";
import { crossoverTable, measureCrossover } from "../test/helpers/onebit-crossover.js";
import { netnsUnavailable } from "../test/helpers/netns.js";

const { values } = scriptArgs(import.meta.url, {
  rate: { type: "string", default: "1gbit" },
  delay: { type: "string", default: "1ms" },
  from: { type: "string" },
  to: { type: "string" },
  quantized: { type: "boolean", default: false },
  iterations: { type: "string" },
  warmup: { type: "string" },
});
const missing = netnsUnavailable();
if (missing) {
  console.error(`onebit-crossover: ${missing}`);
  process.exit(2);
}
const number = (v) => (v === undefined ? undefined : Number(v));
// The full sweep's largest size takes minutes on a 1 Gbit/s link.
const result = await measureCrossover({ ...values, iterations: number(values.iterations), warmup: number(values.warmup), timeoutMs: 3_600_000 });
console.log(`link: ${result.shaping}; backend ${result.backend}; crossover at ${result.crossover ?? "none"} elements\n`);
console.log(crossoverTable(result));
