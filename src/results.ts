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
  /** Its stream, where not "main" (DESIGN.md, "Graphs, streams and groups"). */
  stream?: string;
  /** In a group: its name and how many groups ran it at once (size, busbw and checks are one group's). */
  group?: string;
  groups?: number;
  /** An imported trace's own time for this stage's collective (Kineto's kernel duration), beside `time`. */
  trace_us?: number;
  /** When it started after the step's start (slowest rank, mean over steps): the report's timeline. */
  start_us?: number;
  /** Its sweep point's step, where stages ran on more than one stream. */
  graph?: GraphMetric;
  /** The stage options a parameter sweep set for this row. */
  params?: Record<string, string | number | boolean>;
  /** Each rank's average time, by rank. */
  per_rank_avg_us: number[];
  slowest_rank: number;
  /** Σ over ranks of (rank's average − fastest rank's average). */
  straggler_us: number;
  /** Blocking stages on the hybrid transport (shm+tcp): per step, bytes all ranks sent and the slowest rank's time over each kind of link. */
  links?: LinkClasses;
  /** When #wrong > 0: the first wrong elements, at most 10 per rank. */
  mismatches?: Mismatch[];
  /** With --samples: every timed iteration's time, the slowest rank's and each rank's ([rank][iteration]). */
  samples?: { slowest_us: number[]; per_rank_us: number[][] };
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

/** A step of concurrent stages (DESIGN.md, "Graphs, streams and groups"), on every row of its sweep point. */
export interface GraphMetric {
  /** The step, from its start to the last stream drained: slowest rank, median over steps. */
  step_us: number;
  /** Σ and max of the stages' times run alone (slowest rank, median over solo_steps). */
  solo_sum_us: number;
  solo_max_us: number;
  /** The timed steps of the solo pass: the calibration pass's (5 at most), or the job's iterations with --solo. */
  solo_steps: number;
  /** 100 × (Σ solo − step) / (Σ solo − max solo), clamped to [0, 100]: 100 fully overlapped, 0 serialised. */
  overlap_pct: number;
  /** Stage ids from the step's start to the stage that ended it, each the latest of what the next waited for. */
  critical_path: string[];
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
  /**
   * shm, and shm+tcp within rank 0's host: how large messages moved, as the ranks agreed at start-up:
   * "single-copy: cma (process_vm_readv/writev) from 64 KiB, broadcast from 16 KiB (timed 16-256 KiB at
   * start-up)" (per pair of ranks; where the ranks timed neither path it says why, "not timed: ..."), or
   * "staged (why)" where a rank could not read its peers' memory or SPMD_SHM_SINGLE_COPY=0 told it not to.
   */
  copy_path?: string;
  /**
   * shm: nanoseconds a cache line took from rank 0's host's first rank to each other rank of that host and back,
   * timed at start-up (the best of 8 × 256 round trips): how far apart the ranks' cores are; where the ranks share
   * CPUs, one number, between two threads of that rank on two CPUs it may run on. Launches of one job
   * that differ in it measured different machines (a hypervisor that moved the vCPUs; DESIGN.md, "The verdict").
   */
  core_round_trip_ns?: number[];
  results: ResultRow[];
  average_bus_bandwidth: number;
  /** Per rank, over the job's execution: CPU seconds (user, system) and wall seconds. */
  ranks?: RankUsage[];
  /** What the run depended on: versions, build, library, environment, hosts. */
  manifest?: Manifest;
  /** `runner doctor`'s survey (its results hold no rows). */
  doctor?: DoctorResult;
  /**
   * A run that did not end whole, stopped by a signal or by a rank that died or stopped answering: the sweep
   * points that finished (their rows are the results), of how many, and what ended it.
   */
  interrupted?: Interrupted;
  /** A replayed trace (an imported job): where it came from; its rows carry trace_us where the trace timed them. */
  source?: { format: string; schema: string; files: string[]; world_size: number };
}

export interface Interrupted {
  /**
   * What ended the run: the signal that stopped it ("SIGINT"), or the rank that died or stopped answering, as
   * the launcher saw it ("rank 1 (SIGKILL)", "rank 1 (stopped)", "rank 2 (exit code 1)") or, without
   * `runner launch`, as rank 0's error named it. Absent in files written before it was added.
   */
  by?: string;
  /** The signal that stopped the run, where one did (absent where a rank's death or silence ended it). */
  signal?: string;
  /** Each finished point's count (absent: the tensors' own) and parameters, in the order they ran. */
  finished: SweptPoint[];
  /** The point that was running when the run ended (absent between points). */
  during?: SweptPoint;
  sweep_points: number;
}

/** A sweep point as results name it: its count (absent: the tensors' own) and parameters. */
export interface SweptPoint {
  count?: number;
  params: Record<string, string | number | boolean>;
}

/** Host x host matrices (diagonal: within the host; null where not measured) and what fell below the threshold. */
export interface DoctorResult {
  hosts: string[];
  bandwidth_gbps: (number | null)[][];
  latency_us: (number | null)[][];
  threshold: number;
  outliers: DoctorOutlier[];
  /** Each host's best link, GB/s: what the host is judged by, and what its links are judged against. */
  best_gbps: (number | null)[];
  /** What the whole network is judged against: --expect, the slowest NIC's speed, or nothing. */
  reference: DoctorReference;
  /**
   * Where ranks outnumbered a host's cores ("3 ranks on 2 cores (vm)", metrics/verdict.ts): latency_us then
   * times the scheduler's slices, so it is recorded but neither shown nor judged.
   */
  oversubscribed?: string;
}

/** A NIC as sysfs reports it: its name and speed, Mbit/s. */
export interface DoctorNic {
  name: string;
  mbit: number;
}

export interface DoctorReference {
  /** Every link at once: against --expect, the slowest of the hosts' NICs (when every host reports one), or none. */
  source: "expect" | "nic" | "none";
  /** Each way, GB/s (null when source is none). */
  gbps: number | null;
  /** Each host's fastest NIC (null where none reports a speed). */
  nics: (DoctorNic | null)[];
}

/**
 * `against`: what the value was judged against: the other hosts' best links ("links") or their bandwidth
 * within the host ("within"), --expect ("expect") or the NICs' speed ("nic"). A link is judged against its
 * two hosts' lesser best link (`reference_gbps`); `median_gbps` is the median link, for comparison.
 */
export type DoctorOutlier =
  | { kind: "link"; hosts: [string, string]; gbps: number; median_gbps: number; reference_gbps: number }
  | { kind: "host"; host: string; why: string; gbps: number; reference_gbps: number; against: "links" | "within" | "expect" | "nic" }
  | { kind: "network"; why: string; gbps: number; reference_gbps: number; against: "expect" | "nic" };

export interface TimeStats {
  avg_us: number;
  p50_us: number;
  p95_us: number;
  p99_us: number;
  /** Sample standard deviation of the iterations' times. */
  stddev_us: number;
  min_us: number;
  max_us: number;
}

/** A wrong output element: where, where its value came from (`from`: null for a reduction over every rank), and the values. */
export interface Mismatch {
  rank: number;
  tensor: string;
  index: number;
  from: number | null;
  source_index: number;
  expected: number;
  found: number;
}

export interface LinkClasses {
  shm: { bytes: number; us: number };
  tcp: { bytes: number; us: number };
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

/** results.json's "manifest" (DESIGN.md): enough to tell why two runs differ. */
export interface Manifest {
  runner: string;
  /** `git describe --always --dirty` of the checkout the runner ran from; null when installed. */
  git: string | null;
  node: string;
  /** How the addon was built: MPI_Get_library_version's first line (null without MPI), the CUDA kernels' archs (false without). */
  addon: { mpi: string | null; cuda: string | false };
  /** The library the backend ran on (MPI's version, the NCCL/HCCL library loaded), null for shm/tcp. */
  library: string | null;
  /** NCCL_*, UCX_*, OMPI_MCA_*, MPICH_*, MPIR_CVAR_*, HCCL_*, SLURM_*, SPMD_* and CUDA_VISIBLE_DEVICES of rank 0. */
  env: Record<string, string>;
  /** The runner's own settings as run: backend, deadlines, iterations, check. */
  settings: Record<string, unknown>;
  /** Each host once; cores is what the ranks' process may run on (os.availableParallelism), absent in files before 2026-11-28. */
  hosts: { name: string; cpu: string; cores?: number; gpus: string[] }[];
  /** Where the job's secret came from (never the secret itself): DESIGN.md, "Security". */
  rendezvous_secret?: SecretSource;
}

/**
 * Where a job's secret came from: drawn by `runner launch` ("random"), by rank 0 and broadcast over MPI
 * ("mpi"), from SPMD_RUNNER_TOKEN ("env"), or derived from the job's name and size ("derived", which anyone
 * who knows those can compute). No build reads PMIx, so no run says "pmix".
 */
export type SecretSource = "random" | "mpi" | "env" | "derived";
