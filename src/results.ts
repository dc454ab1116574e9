// What a run produces, as results.json has it: the types the metrics fill in and the writers read, kept
// apart from both so that neither imports the other.

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
  /**
   * Where the ranks ran: the hosts in order of their lowest rank, as the ranks found when they met; and, where
   * the runner links the ranks itself (shm, tcp), how many pairs of ranks each kind of link joined.
   */
  topology?: { hosts: { name: string; ranks: number[] }[]; links?: { shm: number; tcp: number } };
  results: ResultRow[];
  average_bus_bandwidth: number;
  /** Per rank, over the job's execution: CPU seconds (user, system) and wall seconds. */
  ranks?: RankUsage[];
}

export interface TimeStats {
  avg_us: number;
  p50_us: number;
  p95_us: number;
  min_us: number;
  max_us: number;
}

export interface Overlap {
  /** Post to completion, slowest rank. */
  overall_us: number;
  /** Other stages' time while the op was in flight. */
  compute_us: number;
  /** The op's own communication time (measured while overlapping). */
  comm_us: number;
  /** OSU's overlap: max(0, 100 − (overall − compute) / comm · 100). */
  overlap_pct: number;
}

/** One row of results.json's "ranks". */
export interface RankUsage {
  rank: number;
  cpu_user_s: number;
  cpu_system_s: number;
  wall_s: number;
  /**
   * The process's peak resident memory in KiB (getrusage's ru_maxrss) when the results were gathered, so
   * after every sweep point: the job's tensors and buffers at its largest point plus the Node runtime
   * (about 100 MiB for an idle rank on Linux x86-64, Node 20).
   */
  max_rss_kib: number;
  /** Where it ran: its host's name (as in topology.hosts), the host's index there, and the rank's index among the host's ranks. */
  host?: string;
  node?: number;
  local_rank?: number;
}
