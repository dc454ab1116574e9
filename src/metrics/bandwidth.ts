import type { ResultRow } from "../results.js";

/** Algorithm bandwidth in GB/s (1e9 bytes), as nccl-tests prints it. */
export function algbw(bytes: number, timeUs: number): number {
  return timeUs > 0 ? bytes / (timeUs * 1e3) : 0;
}

export function busbw(bytes: number, timeUs: number, factor: number): number {
  return algbw(bytes, timeUs) * factor;
}

/** nccl-tests' "Avg bus bandwidth": the mean busbw over rows that move data. */
export function averageBusBandwidth(rows: readonly ResultRow[]): number {
  const moving = rows.filter((r) => r.size > 0);
  return moving.length ? moving.reduce((s, r) => s + r.busbw, 0) / moving.length : 0;
}
