import { formatSize } from "../config/size.js";
import type { ResultDocument, ResultRow } from "../results.js";
import { stageCell } from "./table.js";

const ms = (us: number) => (us / 1e3).toFixed(3);

/**
 * DeepSpeed's comms-logger summary: per op, per message size, the call count, total and average latency
 * and bandwidths; then each op's straggler effect and its slowest rank, and OSU's overlap columns for
 * nonblocking stages. Iterations count as calls.
 */
export function formatSummary(doc: ResultDocument, iterations: number): string {
  const head = ["Comm. Op", "Message Size", "Count", "Total Latency(ms)", "Avg Latency(ms)", "algbw (GB/s)", "busbw (GB/s)"];
  // A parameter sweep's rows share op and size: each carries the table's label (`ar[algorithm=tree]`) instead.
  const label = (r: ResultRow) => (r.params && Object.keys(r.params).length ? `  ${stageCell(r)}` : "");
  const widths = [Math.max(22, ...doc.results.map((r) => label(r).length + 2)), 14, 8, 18, 16, 13, 13];
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join("").trimEnd();
  const byOp = new Map<string, ResultRow[]>();
  for (const r of doc.results) byOp.set(r.op, [...(byOp.get(r.op) ?? []), r]);
  const out = [line(head)];
  for (const [op, rows] of byOp) {
    out.push(op);
    for (const r of [...rows].sort((a, b) => a.size - b.size)) {
      out.push(line([label(r), formatSize(r.size), String(iterations), ms(r.time.avg_us * iterations), ms(r.time.avg_us), r.algbw.toFixed(3), r.busbw.toFixed(3)]));
    }
  }
  out.push("", line(["Stragglers", "Stage", "", "Straggler(ms)", "Slowest rank", "Its avg(ms)", "Fastest(ms)"]));
  for (const r of doc.results) {
    const slowest = r.per_rank_avg_us[r.slowest_rank] ?? 0;
    out.push(line([r.op, stageCell(r), "", ms(r.straggler_us), String(r.slowest_rank), ms(slowest), ms(Math.min(...r.per_rank_avg_us))]));
  }
  const overlapping = doc.results.filter((r) => r.overlap);
  if (overlapping.length) {
    out.push("", line(["Overlap (OSU)", "Stage", "Count", "Overall(ms)", "Compute(ms)", "Comm(ms)", "Overlap(%)"]));
    for (const r of overlapping) {
      const o = r.overlap!;
      out.push(line([r.op, stageCell(r), String(r.count), ms(o.overall_us), ms(o.compute_us), ms(o.comm_us), o.overlap_pct.toFixed(1)]));
    }
  }
  return out.join("\n") + "\n";
}
