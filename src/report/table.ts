import { describeHosts } from "../comm/topology.js";
import { plural } from "../config/errors.js";
import type { Interrupted, ResultDocument, ResultRow } from "../results.js";

interface Column {
  title: string;
  unit: string;
  width: number;
  left?: boolean;
  /** Shown only for a replayed trace's rows. */
  traced?: boolean;
  cell(r: ResultRow): string;
}

const fixed = (v: number, digits: number) => v.toFixed(digits);
const time = (us: number) => (us >= 1e5 ? fixed(us, 0) : us >= 1e3 ? fixed(us, 1) : fixed(us, 2));

/** The stage id, with the options a parameter sweep set on it: `ar[algorithm=tree]`. */
export function stageCell(r: Pick<ResultRow, "stage" | "params">): string {
  const params = Object.entries(r.params ?? {}).map(([k, v]) => `${k}=${v}`);
  return params.length ? `${r.stage}[${params.join(",")}]` : r.stage;
}

// nccl-tests' columns, with the stage and algorithm in front since a job holds several stages.
const columns: Column[] = [
  { title: "stage", unit: "", width: 14, left: true, cell: stageCell },
  { title: "op", unit: "", width: 20, left: true, cell: (r) => r.op }, // fits "compressed_allreduce"
  { title: "algo", unit: "", width: 13, left: true, cell: (r) => r.algorithm },
  { title: "size", unit: "(B)", width: 12, cell: (r) => String(r.size) },
  { title: "count", unit: "(elements)", width: 12, cell: (r) => String(r.count) },
  { title: "type", unit: "", width: 9, cell: (r) => r.type ?? "none" },
  { title: "redop", unit: "", width: 6, cell: (r) => r.redop ?? "none" },
  { title: "root", unit: "", width: 5, cell: (r) => String(r.root ?? -1) },
  { title: "time", unit: "(us)", width: 10, cell: (r) => time(r.time.avg_us) },
  // Imported traces only (the job's source.trace_us): the trace's own time beside the replay's.
  { title: "trace", unit: "(us)", width: 10, cell: (r) => (r.trace_us === undefined ? "N/A" : time(r.trace_us)), traced: true },
  { title: "algbw", unit: "(GB/s)", width: 8, cell: (r) => fixed(r.algbw, 2) },
  { title: "busbw", unit: "(GB/s)", width: 8, cell: (r) => fixed(r.busbw, 2) },
  { title: "#wrong", unit: "", width: 7, cell: (r) => (r.wrong === null ? "N/A" : String(r.wrong)) },
  // Estimating stages only: ‖out − exact‖/‖exact‖ after the last step.
  { title: "rel_err", unit: "", width: 9, cell: (r) => (r.rel_error === null ? "N/A" : r.rel_error.toExponential(2)) },
  // What this rank sends per step: the bandwidth-optimal algorithm's for exact rows, what estimating stages
  // really put on the wire for theirs.
  { title: "wire", unit: "(B)", width: 11, cell: (r) => String(r.wire_bytes) },
];

/** Pads each cell to its column; a column grows to its longest cell so rows stay aligned. */
function lines(columns: Column[], rows: string[][]): string[] {
  const widths = columns.map((c, i) => Math.max(c.width, ...rows.map((r) => r[i]!.length)));
  return rows.map((cells) => cells.map((c, i) => (columns[i]!.left ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(" "));
}

/** "2 hosts: a (ranks 0,1), b (ranks 2,3); links: 2 shm, 4 tcp" */
function topologyLine(t: NonNullable<ResultDocument["topology"]>): string {
  const hosts = `${t.hosts.length} host${t.hosts.length > 1 ? "s" : ""}: ${describeHosts(t.hosts)}`;
  if (!t.links) return hosts;
  const links = (["shm", "tcp"] as const).filter((k) => t.links![k] > 0).map((k) => `${t.links![k]} ${k}`);
  return `${hosts}; links: ${links.join(", ") || "none"}`;
}

/** "shm 1.2 MB in 340 us (3.5 GB/s), tcp ..." over every stage with link classes (the hybrid transport). */
function linksLine(rows: ResultRow[]): string | undefined {
  const withLinks = rows.filter((r) => r.links);
  if (!withLinks.length) return undefined;
  return (["shm", "tcp"] as const).map((k) => {
    const bytes = withLinks.reduce((n, r) => n + r.links![k].bytes, 0), us = withLinks.reduce((n, r) => n + r.links![k].us, 0);
    return `${k} ${(bytes / 1e6).toFixed(3)} MB (all ranks) in ${time(us)} us${us > 0 ? ` (${(bytes / (us * 1e3)).toFixed(2)} GB/s)` : ""}`;
  }).join(", ");
}

/** "by SIGINT after 2 of 4 sweep points; the rows are theirs". */
export function interruptedLine(i: Interrupted): string {
  return `by ${i.by ?? i.signal} after ${i.finished.length} of ${plural(i.sweep_points, "sweep point")}; the rows are those that finished`;
}

/** The table's pieces: the lines above and below it (without their "# "), and its columns' titles, units and cells. */
export interface TableParts {
  head: string[];
  columns: { title: string; unit: string; left: boolean }[];
  rows: string[][];
  foot: string[];
}

/** A replayed trace (an imported job) shows the trace's own time beside the measured one. */
function shownColumns(doc: ResultDocument): Column[] {
  return columns.filter((c) => !c.traced || doc.source !== undefined);
}

export function tableParts(doc: ResultDocument): TableParts {
  const head = [
    `spmd-runner ${doc.version}: job ${doc.job}, ${plural(doc.world_size, "rank")}, backend ${doc.backend}`,
    ...(doc.source ? [`replays ${doc.source.format} trace ${doc.source.files.join(", ")} (schema ${doc.source.schema}, ${plural(doc.source.world_size, "rank")})`] : []),
    ...(doc.topology ? [topologyLine(doc.topology)] : []),
  ];
  const shown = shownColumns(doc);
  const wrong = doc.results.reduce((n, r) => n + (r.wrong ?? 0), 0);
  // A run that checked nothing found nothing wrong, which is not the same as finding all right.
  const checked = doc.results.some((r) => r.wrong !== null);
  const foot = doc.results.filter((r) => r.fallback).map((r) => `Fallback             : ${stageCell(r)} at count ${r.count}: ${r.fallback}`);
  foot.push(`Out of bounds values : ${checked ? `${wrong} ${wrong ? "FAILED" : "OK"}` : "N/A (not checked)"}`, `Avg bus bandwidth    : ${doc.average_bus_bandwidth.toFixed(4)}`);
  if (doc.interrupted) foot.push(`Interrupted          : ${interruptedLine(doc.interrupted)}`);
  const links = linksLine(doc.results);
  if (links) foot.push(`Links per step       : ${links}`);
  return {
    head,
    columns: shown.map((c) => ({ title: c.title, unit: c.unit, left: !!c.left })),
    rows: doc.results.map((r) => shown.map((c) => c.cell(r))),
    foot,
  };
}

/** The nccl-tests-style text table, ending with the "Avg bus bandwidth" line. */
export function formatTable(doc: ResultDocument): string {
  const t = tableParts(doc);
  const [title, unit, ...rows] = lines(shownColumns(doc), [t.columns.map((c) => c.title), t.columns.map((c) => c.unit), ...t.rows]);
  const out = [...t.head.map((l) => `# ${l}`), "#", "# " + title, "# " + unit, ...rows.map((r) => "  " + r), ...t.foot.map((l) => `# ${l}`)];
  return out.join("\n") + "\n";
}
