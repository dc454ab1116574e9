import type { ResultDocument } from "./result.js";

const COLUMNS = [
  "stage", "op", "size", "count", "type", "redop", "root", "algorithm",
  "avg_us", "p50_us", "p95_us", "min_us", "max_us", "algbw", "busbw", "wrong", "wire_bytes", "rel_error",
] as const;

function cell(v: unknown): string {
  if (v === null || v === undefined) return "";
  const s = String(v);
  return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

/** One row per result, times flattened into columns; empty cells for null (RFC 4180 quoting). */
export function formatCsv(doc: ResultDocument): string {
  const lines = [COLUMNS.join(",")];
  for (const r of doc.results) {
    const flat: Record<string, unknown> = { ...r, ...r.time };
    lines.push(COLUMNS.map((c) => cell(flat[c])).join(","));
  }
  return lines.join("\n") + "\n";
}
