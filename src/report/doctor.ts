// doctor's findings in words, the same on the console (doctor/format.ts) and in report.html.
import type { DoctorOutlier, DoctorReference } from "../results.js";

/** Which reference judged every link at once. */
export function referenceText(r: DoctorReference): string {
  if (r.source === "expect") return `--expect ${r.gbps!.toFixed(3)} GB/s`;
  if (r.source === "none") return "nothing (no NIC reports its speed: pass --expect GBPS)";
  const slowest = r.nics.reduce((x, y) => (y!.mbit < x!.mbit ? y : x))!;
  return `the slowest NIC's speed (${slowest.name}, ${slowest.mbit} Mbit/s: ${r.gbps!.toFixed(3)} GB/s each way)`;
}

/** How doctor judged: one sentence in two lines. */
export const judgedBy = (threshold: number, r: DoctorReference): [string, string] => [
  `judged at ${threshold} of: each host, the median of the other hosts' best links; each link, its two hosts' lesser best link;`,
  `every link at once, ${referenceText(r)}`,
];

/** One outlier in words. */
export function outlierText(o: DoctorOutlier): string {
  if (o.kind === "host") return `host ${o.host}: ${o.why}`;
  if (o.kind === "network") return o.why;
  return `link ${o.hosts[0]} <-> ${o.hosts[1]}: ${o.gbps.toFixed(3)} GB/s, ${(o.gbps / o.reference_gbps).toFixed(2)} of its hosts' lesser best link (${o.reference_gbps.toFixed(3)} GB/s)`;
}
