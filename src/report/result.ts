import type { Overlap } from "../metrics/overlap.js";
import type { TimeStats } from "../metrics/stats.js";
import type { RankUsage } from "../metrics/usage.js";

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
  /** The stage options a parameter sweep set for this row. */
  params?: Record<string, string | number | boolean>;
  /** Each rank's average time, by rank. */
  per_rank_avg_us: number[];
  slowest_rank: number;
  /** Σ over ranks of (rank's average − fastest rank's average). */
  straggler_us: number;
  /** Nonblocking stages only (OSU's method). */
  overlap?: Overlap;
  // Added on the rows of estimating stages (compressed_allreduce, quantized_allreduce) only. Per-step
  // arrays start at the first warmup step, since the error-feedback state evolves from there; null where
  // the exact result is 0.
  /** The exact collective's wire bytes over this stage's (null for one rank, where neither sends). */
  compression_ratio?: number | null;
  rel_error_by_step?: (number | null)[];
  /** ‖mean of all steps' outputs − exact‖ / ‖exact‖: what error feedback drives down. */
  running_mean_rel_error?: number | null;
  running_mean_rel_error_by_step?: (number | null)[];
  /**
   * On the rows of stages that can fall back to the exact collective (quantized_allreduce): why this row
   * ran it instead, or null when it did not. Such a row has #wrong instead of the error fields.
   */
  fallback?: string | null;
}

export interface ResultDocument {
  version: string;
  job: string;
  world_size: number;
  /** "shm", "tcp", "shm+tcp" (shm within hosts, tcp between) or "mpi". */
  backend: string;
  /** Where the ranks ran and how many pairs of ranks each kind of link joined (absent under mpi). */
  topology?: { hosts: { name: string; ranks: number[] }[]; links: { shm: number; tcp: number } };
  results: ResultRow[];
  average_bus_bandwidth: number;
  /** Per rank, over the job's execution: CPU seconds (user, system) and wall seconds. */
  ranks?: RankUsage[];
}

/** nccl-tests' "Avg bus bandwidth": the mean busbw over rows that move data. */
export function averageBusBandwidth(rows: readonly ResultRow[]): number {
  const moving = rows.filter((r) => r.size > 0);
  return moving.length ? moving.reduce((s, r) => s + r.busbw, 0) / moving.length : 0;
}
