// Doctor's findings as results.json holds them and as the console shows them: host x host matrices in the
// manner of nvbandwidth's, then the outliers.
import { judgedBy, outlierText } from "../report/doctor.js";
import type { DoctorNic, DoctorReference, DoctorResult } from "../results.js";
import { bestLinks, judge, pairKey, type Measured } from "./judge.js";
import { nicGbps } from "./nic.js";

/** The reference for every link at once: --expect, else the slowest NIC where every host reports one. */
export function referenceOf(expect: number | undefined, nics: (DoctorNic | null)[]): DoctorReference {
  if (expect !== undefined) return { source: "expect", gbps: expect, nics };
  if (nics.length === 0 || nics.some((n) => n === null)) return { source: "none", gbps: null, nics };
  return { source: "nic", gbps: nicGbps(Math.min(...nics.map((n) => n!.mbit))), nics };
}

export function doctorResult(names: string[], measured: Measured, threshold: number, reference: DoctorReference, oversubscribed?: string): DoctorResult {
  const matrix = (pick: "gbps" | "us") =>
    names.map((_, a) => names.map((__, b) => measured.get(pairKey(a <= b ? [a, b] : [b, a]))?.[pick] ?? null));
  const abs = reference.source === "none" ? undefined : { source: reference.source, gbps: reference.gbps! };
  return {
    hosts: names,
    bandwidth_gbps: matrix("gbps"),
    latency_us: matrix("us"),
    threshold,
    outliers: judge(names, measured, threshold, abs),
    best_gbps: bestLinks(names.length, measured),
    reference,
    ...(oversubscribed && { oversubscribed }),
  };
}

/** The closing lines: how doctor judged, then the outliers, or that there is none (or no reference to judge by). */
function verdict(d: DoctorResult): string[] {
  const how = d.hosts.length < 2 ? [] : judgedBy(d.threshold, d.reference).map((l, i) => (i ? `  ${l}` : l));
  const lines = d.outliers.map((o) => `outlier: ${outlierText(o)}`);
  if (lines.length) return [...how, ...lines];
  if (d.hosts.length === 2 && d.reference.source === "none") return [...how, "no reference: pass --expect GBPS (two hosts have only each other to compare with)"];
  return [...how, `no outliers (threshold ${d.threshold})`];
}

function formatMatrix(title: string, hosts: string[], m: (number | null)[][], digits: number): string {
  const cells = m.map((row) => row.map((v) => (v === null ? "-" : v.toFixed(digits))));
  const width = Math.max(8, ...hosts.map((h) => h.length), ...cells.flat().map((c) => c.length)) + 1;
  const head = " ".repeat(width) + hosts.map((h) => h.padStart(width)).join("");
  const rows = hosts.map((h, i) => h.padEnd(width) + cells[i]!.map((c) => c.padStart(width)).join(""));
  return [title, head, ...rows].join("\n");
}

/** The matrices, how doctor judged, and a line per outlier (or that there is none). */
export function formatDoctor(d: DoctorResult, coreRoundTrips: readonly number[] = []): string {
  return [
    formatMatrix("Bandwidth (GB/s, each way while both ways run; diagonal: between two ranks of the host)", d.hosts, d.bandwidth_gbps, 3),
    "",
    d.oversubscribed
      ? `Latency: not shown: ${d.oversubscribed}: the ranks take turns on the cores, so an 8-byte exchange times the scheduler's slices, not the link (run doctor with ranks <= cores)`
      : formatMatrix("Latency (us, 8-byte exchange)", d.hosts, d.latency_us, 1),
    "",
    // A VM's vCPUs the hypervisor placed far apart slow every op on the host several times (DESIGN.md, "The verdict").
    ...(coreRoundTrips.length ? [`Cores: a cache line's round trip between rank 0's CPU and the others', at start-up: ${coreRoundTrips.map((ns) => ns.toFixed(1)).join(", ")} ns`, ""] : []),
    ...verdict(d),
    "",
  ].join("\n");
}
