// Doctor's findings as results.json holds them and as the console shows them: host x host matrices in the
// manner of nvbandwidth's, then the outliers.
import type { DoctorResult } from "../results.js";
import { findOutliers, pairKey, type Measured } from "./schedule.js";

export function doctorResult(names: string[], measured: Measured, threshold: number): DoctorResult {
  const matrix = (pick: "gbps" | "us") =>
    names.map((_, a) => names.map((__, b) => measured.get(pairKey(a <= b ? [a, b] : [b, a]))?.[pick] ?? null));
  return {
    hosts: names,
    bandwidth_gbps: matrix("gbps"),
    latency_us: matrix("us"),
    threshold,
    outliers: findOutliers(names, measured, threshold),
  };
}

function formatMatrix(title: string, hosts: string[], m: (number | null)[][], digits: number): string {
  const cells = m.map((row) => row.map((v) => (v === null ? "-" : v.toFixed(digits))));
  const width = Math.max(8, ...hosts.map((h) => h.length), ...cells.flat().map((c) => c.length)) + 1;
  const head = " ".repeat(width) + hosts.map((h) => h.padStart(width)).join("");
  const rows = hosts.map((h, i) => h.padEnd(width) + cells[i]!.map((c) => c.padStart(width)).join(""));
  return [title, head, ...rows].join("\n");
}

/** The matrices and a line per outlier (or that there is none). */
export function formatDoctor(d: DoctorResult): string {
  const outliers = d.outliers.map((o) =>
    o.kind === "link"
      ? `outlier: link ${o.hosts[0]} <-> ${o.hosts[1]}: ${o.gbps.toFixed(3)} GB/s, ${(o.gbps / o.median_gbps).toFixed(2)} of the median link (${o.median_gbps.toFixed(3)} GB/s)`
      : `outlier: host ${o.host}: ${o.why}`,
  );
  return [
    formatMatrix("Bandwidth (GB/s, each way while both ways run; diagonal: between two ranks of the host)", d.hosts, d.bandwidth_gbps, 3),
    "",
    formatMatrix("Latency (us, 8-byte exchange)", d.hosts, d.latency_us, 1),
    "",
    ...(outliers.length ? outliers : [`no outliers (threshold ${d.threshold} of the median)`]),
    "",
  ].join("\n");
}
