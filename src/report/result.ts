import type { TimeStats } from "../metrics/stats.js";

/** One row of results.json; field names are fixed by DESIGN.md ("Command line"). */
export interface ResultRow {
  stage: string;
  op: string;
  size: number;
  count: number;
  type: string | null;
  redop: string | null;
  root: number | null;
  algorithm: string;
  time: TimeStats;
  algbw: number;
  busbw: number;
  wrong: number | null;
  wire_bytes: number;
  rel_error: number | null;
}

export interface ResultDocument {
  version: string;
  job: string;
  world_size: number;
  backend: string;
  results: ResultRow[];
  average_bus_bandwidth: number;
}

/** nccl-tests' "Avg bus bandwidth": the mean busbw over rows that move data. */
export function averageBusBandwidth(rows: readonly ResultRow[]): number {
  const moving = rows.filter((r) => r.size > 0);
  return moving.length ? moving.reduce((s, r) => s + r.busbw, 0) / moving.length : 0;
}
