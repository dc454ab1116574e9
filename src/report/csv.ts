import type { ResultDocument, ResultRow } from "../results.js";

/** The columns every CSV starts with, in this order; whatever else the rows carry follows. */
const LEADING = [
  "stage", "op", "size", "count", "type", "redop", "root", "algorithm",
  "avg_us", "p50_us", "p95_us", "p99_us", "stddev_us", "min_us", "max_us", "algbw", "busbw", "wrong", "wire_bytes", "rel_error",
] as const;

/** One RFC 4180 cell: empty for null or absent, quoted where it holds a comma, quote or line break. */
export function csvCell(v: unknown): string {
  if (v === null || v === undefined) return "";
  const s = String(v);
  return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

/**
 * Every field of a row as a cell: the time statistics as their own columns (avg_us, ...), other objects'
 * fields as parent.field (params.bits, overlap.overlap_pct), arrays as their values joined by ";".
 */
export function flatten(row: ResultRow): Map<string, unknown> {
  const cells = new Map<string, unknown>();
  const put = (key: string, v: unknown): void => {
    if (Array.isArray(v)) cells.set(key, v.map((x) => x ?? "").join(";"));
    else if (v !== null && typeof v === "object") {
      for (const [k, x] of Object.entries(v)) put(key === "time" ? k : `${key}.${k}`, x);
    } else cells.set(key, v);
  };
  // Per-iteration samples (--samples) are a matrix per row: results.json holds them, a cell could not.
  for (const [k, v] of Object.entries(row)) if (k !== "samples") put(k, v);
  return cells;
}

/**
 * One row per result and a column for every field any row has (sweep parameters, fallback, per-rank
 * times), so rows of one stage at different sweep points stay apart; empty cells for null or absent
 * (RFC 4180 quoting).
 */
export function formatCsv(doc: ResultDocument): string {
  const rows = doc.results.map(flatten);
  const columns = [...new Set<string>([...LEADING, ...rows.flatMap((r) => [...r.keys()])])];
  const lines = [columns.map(csvCell).join(",")];
  for (const r of rows) lines.push(columns.map((c) => csvCell(r.get(c))).join(","));
  return lines.join("\n") + "\n";
}
