// The native addon's surface, typed in one place (the only file that loads it).
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { PACKAGE_ROOT } from "../version.js";
import type * as z from "zod";
import type { dtypeSchema } from "../config/job.js";

// The names native code accepts and raises, as the addon exports them in `enums` (test/contract.test.js
// holds these lists equal to the addon's and to the job schema's).
export type NativeDType = z.infer<typeof dtypeSchema>;
export const NATIVE_OP_KINDS = [
  "allreduce", "reduce_scatter", "all_gather", "gather", "broadcast", "reduce", "scatter", "all_to_all", "all_to_allv", "send_recv", "barrier", "compute",
] as const;
export type NativeOpKind = (typeof NATIVE_OP_KINDS)[number];
/** "mpi" / "nccl" / "hccl": the library's own collective, what "auto" runs on that backend. */
export const NATIVE_ALGORITHMS = ["auto", "ring", "tree", "direct", "dissemination", "hierarchical", "shared", "mpi", "nccl", "hccl"] as const;
export type NativeAlgorithm = (typeof NATIVE_ALGORITHMS)[number];
/** Errors from native code carry one of these codes. */
export const NATIVE_ERROR_CODES = [
  "ERR_SPMD_INVALID", "ERR_SPMD_TIMEOUT", "ERR_SPMD_PEER_GONE", "ERR_SPMD_SYSTEM", "ERR_SPMD_UNSUPPORTED", "ERR_SPMD_ABORTED",
  /** A peer's messages do not match this rank's (tcp: another op or size at the same place). */
  "ERR_SPMD_DESYNC",
  "ERR_SPMD_NCCL", "ERR_SPMD_HCCL", "ERR_SPMD_DEVICE",
  /** An allocation failed; the message names the stage or tensor and the bytes. */
  "ERR_SPMD_NOMEM",
] as const;
export type NativeErrorCode = (typeof NATIVE_ERROR_CODES)[number];

export interface NativeFill {
  kind: "normal" | "uniform" | "integers" | "constant" | "rank";
  seed: number;
  a: number; // normal: mean; uniform/integers: low; constant: value
  b: number; // normal: std;  uniform/integers: high
}

export interface NativeTensor {
  name: string;
  dtype: NativeDType;
  count: number;
  fill: NativeFill;
}

/**
 * An op as native code reads it (addon/program_from_js.cc): the fields every op carries, and its kind's own.
 * The addon reads each field its kind has, none defaulted, and refuses any other, so this type and the
 * reader cannot drift apart unnoticed (test/contract.test.js).
 */
interface NativeOpBase {
  stage: string;
  algorithm: NativeAlgorithm;
  /** The stream's lane: 0 ("main") runs in order; others run concurrently on workers (graph/groups.ts). */
  lane: number;
  /** Indices of earlier ops on other lanes this op waits for. */
  waitFor: number[];
  /** A process group's partition of the ranks: the op runs inside the group holding this rank; null: all ranks. */
  groups: number[][] | null;
  timeoutSec: number;
}

/** "mean" travels as a sum that native code divides once at the end. */
export interface NativeReduction {
  op: "sum" | "max" | "min";
  mean: boolean;
}

/** An estimating allreduce or reduce_scatter in place of the exact one. */
export type NativeCompression =
  /**
   * The compressed_allreduce stage (an allreduce; 1 bit per element, error feedback, mean); errors zeroed every
   * resetEvery steps (0: never). Elements of each rank's chunk per pipelined piece (0: the native default, which
   * pipelines only where the ranks run on several hosts); the bits do not depend on it.
   */
  | { kind: "onebit"; resetEvery: number; pieceValues: number; acrossHosts: boolean }
  /** The quantized_allreduce stage (a reduce_scatter, or an allreduce for its full output). */
  | {
      kind: "quantized";
      /** int4 or int8 codes, for the reduce-scatter and for the all-gather of an allreduce. */
      bits: 4 | 8;
      gatherBits: 4 | 8;
      /** Values per quantization group (even). */
      groupSize: number;
      /** Ranks per node, numbered node by node (divides the world size), or each rank's node (every node as many ranks). */
      layout: { localSize: number } | { nodeOf: readonly number[] };
      /** Each quantization carries its error into the next step, weighted by beta. */
      errorFeedback: boolean;
      beta: number;
      /** Groups of each block per pipelined piece (0: the native default); the bits do not depend on it. */
      pieceGroups: number;
    };

/** nccl-tests' in place: one buffer is the input and the output. */
interface InPlace {
  inPlace: boolean;
}

/** Each kind's own fields, and its inputs: tensor indices, one, several for a coalesced reduce_scatter, none for barrier and compute. */
export type NativeOpOf = { inputs: number[] } & (
  | ({ kind: "allreduce"; compression: NativeCompression | null } & NativeReduction & InPlace)
  | ({ kind: "reduce_scatter"; coalesced: boolean; compression: NativeCompression | null } & NativeReduction & InPlace)
  | ({ kind: "all_gather" | "all_to_all" } & InPlace)
  /** counts[g][i][j]: elements rank i of group g (of the only group, the world, without groups) sends to rank j. */
  | { kind: "all_to_allv"; counts: (readonly (readonly number[])[])[] }
  | { kind: "gather" | "scatter"; root: number }
  | ({ kind: "broadcast"; root: number } & InPlace)
  | ({ kind: "reduce"; root: number } & NativeReduction & InPlace)
  /** Sends to the rank `shift` ahead and receives from the one behind, or exchanges with `peer` both ways (doctor's disjoint pairs). */
  | { kind: "send_recv"; shift: number; peer: number | null }
  | { kind: "barrier" }
  | { kind: "compute"; computeUs: number }
);

export type NativeOp = NativeOpBase & NativeOpOf;

// The union above names every kind native code knows, and no other.
type SameNames<A, B> = [A] extends [B] ? ([B] extends [A] ? true : never) : never;
export const EVERY_KIND_HAS_FIELDS: SameNames<NativeOpOf["kind"], NativeOpKind> = true;

export interface NativeProgram {
  tensors: NativeTensor[];
  ops: NativeOp[];
  warmup: number;
  iterations: number;
  check: boolean;
  timeoutSec: number;
}

export interface NativeOpResult {
  algorithm: NativeAlgorithm;
  timeUs: Float64Array; // per timed step, this rank
  startUs: Float64Array; // per timed step: when it started, after the step's start
  overallUs: Float64Array; // nonblocking: post to completion
  concurrentUs: Float64Array; // nonblocking: other ops' time while in flight
  wrong: number;
  checked: number;
  /** The first wrong elements on this rank (at most 10), as the check found them. */
  mismatches: NativeMismatch[];
  /** Blocking ops on the hybrid transport (shm+tcp): bytes sent and microseconds spent per kind, summed over timed steps. */
  links?: { shmBytes: number; tcpBytes: number; shmUs: number; tcpUs: number };
  // Estimating ops (compressed and quantized allreduce) only, measured against the exact result (the sum or
  // the mean). Sums of squares are over this rank's block of the elements; add them up over ranks for the
  // whole array. Per-step arrays include warmup steps.
  wireBytes?: Float64Array; // [bytes this rank sends per step]
  exactSq?: Float64Array; // [sum of exact^2]
  errorSq?: Float64Array; // per step: sum of (output - exact)^2
  runningErrorSq?: Float64Array; // per step: sum of (mean of the outputs so far - exact)^2
}

export interface NativeMismatch {
  /** In this rank's output. */
  index: number;
  /** The input tensor (program order) and its element the value came from. */
  tensor: number;
  sourceIndex: number;
  /** The rank whose element it is; -1 for a reduction over every rank. */
  from: number;
  expected: number;
  found: number;
}

/** A piece of an op's state, e.g. compressed allreduce's "worker_error" or quantized allreduce's "intra_error". */
export interface NativeStateBuffer {
  name: string;
  dtype: NativeDType;
  data: Buffer;
}

export interface ShmOptions {
  backend: "shm";
  name: string;
  /** 64 hex digits proving the segment is the job's (secret.ts segmentTag): the creator writes it, the others check it. */
  tag: string;
  rank: number;
  size: number;
  create: boolean;
  channelBytes?: number;
  /** This rank shares its CPUs with other ranks (comm/host.ts sharesCores): waits sleep soon, never spin long. */
  sharesCores?: boolean;
  /** false: this rank stages every message (SPMD_SHM_SINGLE_COPY=0), and so, agreed at connect(), do all ranks. */
  singleCopy?: boolean;
  /** false: this rank keeps single copy's default thresholds untimed (SPMD_SHM_SINGLE_COPY=fixed), and so do all ranks. */
  timedCopyPath?: boolean;
}

/** The tcp backend: over tcp to every rank, or with `local` over shm to the ranks of this host ("shm+tcp"). */
export interface TcpOptions {
  backend: "tcp";
  rank: number;
  size: number;
  /** 64 hex digits: the job secret's key for the tcp transport (comm/secret.ts), which every peer proves it holds. */
  key: string;
  /** Where this rank listens; the communicator takes its socket over. */
  endpoint: NativeTcpEndpoint;
  /** nodeOf[r]: rank r's host (Topology.hostOf), which the hierarchical allreduce groups by. */
  nodeOf: readonly number[];
  /** The segment of this host's ranks (those of its node in nodeOf): its lowest rank creates it. */
  local?: { name: string; tag: string; channelBytes?: number; singleCopy?: boolean; sharesCores?: boolean };
}

/** A listening socket opened before the ranks exchange addresses (port 0: the kernel picks). */
export interface NativeTcpEndpoint {
  /** The bound address: a numeric IP address, or "::" / "0.0.0.0" for every interface. */
  readonly address: string;
  readonly port: number;
}

/** Where a tcp peer listens; null for this rank and for ranks reached through shm. */
export type TcpPeer = { host: string; port: number } | null;

export interface MpiOptions {
  backend: "mpi";
  rank: number;
  size: number;
  /** The bootstrap whose MPI thread the communicator runs on. */
  mpi: NativeMpiBootstrap;
}

export interface LibraryOptions {
  backend: "nccl" | "hccl";
  rank: number;
  size: number;
  /** The local rank picks the device (CUDA or Ascend). */
  localRank: number;
  /** The vendor library to open (vendor-library.ts). */
  library: string;
  /** From rank 0's libraryId: NCCL's 128-byte unique id, HCCL's 4108-byte root info. */
  id: Buffer;
}

/** What libraryProbe found in a library that loads. */
export interface LibraryProbe {
  /** Optional symbols it lacks, comma-separated ("" for none): those features degrade. */
  missing: string;
  /** "NCCL 2.21.5" (ncclGetVersion), or "" where the library does not say. */
  version: string;
}

export interface MpiWorld {
  rank: number;
  size: number;
  /** What MPI_Init_thread granted: "multiple" gives the backend a second lane for nonblocking ops. */
  threadLevel: "multiple" | "serialized" | "funneled" | "single";
  lanes: 1 | 2;
  /** This rank's index and their number among the ranks MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) puts on its node. */
  shared: { localRank: number; localSize: number };
}

/** This process's MPI runtime (its own thread; MPI_Init_thread, MPI_Finalize) and exchanges over it. */
export interface NativeMpiBootstrap {
  /** MPI_Init_thread on the MPI thread; `localRanks` > cores sets Open MPI's mpi_yield_when_idle. */
  init(options: { localRanks: number; funneled: boolean }): Promise<MpiWorld>;
  /** Every rank's value, in rank order. */
  allGather(value: string, timeoutMs: number): Promise<string[]>;
  /** Rank 0's value on every rank. */
  broadcast(value: string | undefined, timeoutMs: number): Promise<string>;
  barrier(timeoutMs: number): Promise<void>;
  /**
   * Blocks until the MPI thread has run what was queued, then MPI_Finalize. `interrupt` first ends the
   * op the MPI thread waits in. False, with MPI left up, when failed waits stranded requests: end the job
   * with abort() then. MPI_Abort itself if finalizing takes longer than `timeoutMs`.
   */
  finalize(timeoutMs: number, interrupt?: string): boolean;
  /** MPI_Abort: the last resort; the process (and, under mpirun, the job) ends. */
  abort(exitCode: number): never;
  /** The MPI call init() is in, or last made ("MPI_Init_thread", "MPI_Comm_dup", ...): for a start-up past its deadline. */
  startupStep(): string;
}

/** One op in a flight record: what a rank was doing when a deadline passed or a peer died. */
export interface FlightEntry {
  /** The op's number on this communicator: the same op on every rank. */
  seq: number;
  /** -1 outside the step loop (setup, reporting). */
  step: number;
  op: NativeOpKind;
  /** The stage id, "(step start)" and "(run end)" for the barriers that start each step and follow the last, "(report: ...)" for reporting. */
  stage: string;
  bytes: number;
  state: "running" | "done" | "failed" | "timed out" | "peer gone" | "aborted";
  /** A library collective over every rank (MPI), rather than point-to-point exchanges. */
  allPeers: boolean;
  /** The peers of the op's latest exchange (at most 4 listed; the counts are complete). */
  to: number[];
  toCount: number;
  from: number[];
  fromCount: number;
  startedMsAgo: number;
  /** Its duration, or how long it has run so far. */
  us: number;
}

export interface NativeCommunicator {
  readonly rank: number;
  readonly size: number;
  /** "shm", "tcp", "shm+tcp" or "mpi". */
  readonly backend: string;
  /**
   * How large messages move where the backend has a choice, as the ranks agreed at connect(): shm's (and
   * shm+tcp's within a host) "single-copy: cma (process_vm_readv/writev) from 64 KiB, broadcast from 16
   * KiB (timed 16-256 KiB at start-up)" (the sizes per pair of ranks, and how the ranks came by them) or
   * "staged (why)"; "" on other backends.
   */
  readonly copyPath: string;
  /**
   * Nanoseconds a cache line took from the host's first rank to each of its other ranks and back, as timed at
   * connect() (shm; native/src/backends/shm/core_probe.h); empty where not timed (other backends, one rank,
   * more ranks than CPUs, a rank that lost its CPU throughout).
   */
  readonly coreRoundTrips: number[];
  /** Steps the program now running has finished (for progress displays). */
  readonly stepsDone: number;
  run(program: NativeProgram): Promise<NativeOpResult[]>;
  /** A small exchange of reporting, bounded by `timeoutSec` and recorded as `label` in the flight record. */
  allreduceF64(data: Float64Array, op: "sum" | "max" | "min", timeoutSec: number, label: string): Promise<Float64Array>;
  /** Op `op`'s output on this rank after the last run. */
  output(op: number): { dtype: NativeDType; data: Buffer };
  /** Tensor `index` (program order) as the last run filled it on this rank. */
  tensor(index: number): { dtype: NativeDType; data: Buffer };
  /** Op `op`'s state on this rank after the last run (empty for ops that keep none), e.g. error buffers. */
  state(op: number): NativeStateBuffer[];
  /**
   * Joins the other ranks where that blocks until all arrive (nccl, hccl); resolves at once for mpi. The shm
   * ranks, once all have attached, agree whether large messages move single-copy (see copyPath).
   * The tcp backend learns where its peers listen (`peers` indexed by rank); it connects to each on first use.
   */
  connect(peers?: TcpPeer[]): Promise<void>;
  /** This rank's last ops (both lanes), oldest first; only while no op is in flight (after a failure, say). */
  flightRecord(): FlightEntry[];
  /** Drops names other processes could still attach to (the shm segment's); idempotent. */
  release(): void;
  close(): void;
}

interface NativeModule {
  Communicator: new (options: ShmOptions | TcpOptions | MpiOptions | LibraryOptions) => NativeCommunicator;
  /** `peers`: how many connections may arrive at once (the listen backlog). */
  TcpEndpoint: new (options: { address: string; peers: number }) => NativeTcpEndpoint;
  backends: string[];
  /** Every name native code's own tables hold. */
  enums: { dtypes: string[]; ops: string[]; algorithms: string[]; errorCodes: string[] };
  /** ncclGetUniqueId / HcclGetRootInfo from `library` (throws ERR_SPMD_UNSUPPORTED when it does not load). */
  libraryId(backend: "nccl" | "hccl", library: string): Buffer;
  /** Loads `library` and reports on it; throws why it cannot. */
  libraryProbe(backend: "nccl" | "hccl", library: string): LibraryProbe;
  /** Loads `library`, then asks its device runtime about device `index` (cudaMemGetInfo, aclrtGetMemInfo); throws why it cannot. */
  deviceMemory(backend: "nccl" | "hccl", library: string, index: number): { free: number; total: number; call: string };
  /** Present when the MPI backend is built. */
  MpiBootstrap?: new () => NativeMpiBootstrap;
  /** MPI_Get_library_version's text, when the MPI backend is built. */
  mpiLibrary?: string;
  /** The CUDA kernels nvcc built into this addon ("sm_80 sm_90 compute_90", fatbin bytes); null without nvcc. */
  cudaKernels: { archs: string; bytes: number } | null;
  /** `signal` to this process when its parent dies (Linux's PR_SET_PDEATHSIG); false when the parent is no longer `parentPid`. */
  endWithParent(signal: number, parentPid: number): boolean;
  /** Why shm ranks on this host could not read each other's memory (process_vm_readv), "" when they could. */
  singleCopyRefusal(): string;
  /**
   * Bytes between a pair of shm ranks from which a block moves single-copy where the ranks agreed on it and
   * did not time the two paths, or found single copy slower at every size they timed (and from which
   * broadcast does, at 2 ranks).
   */
  singleCopyFromBytes: number;
  singleCopyBroadcastFromBytes: number;
  /** A rank's input bytes at which 2 shm ranks time an allreduce staged and pulled at start-up (the reductions pull from one of them, or stage). */
  singleCopyReduceTimedBytes: number[];
  /** The sizes per pair of ranks at which shm ranks time the staged path against single copy at start-up. */
  singleCopyTimedBytes: number[];
}

/** SPMD_BUILD_DIR as the user gave it, where set. */
const GIVEN_BUILD_DIR = process.env.SPMD_BUILD_DIR || undefined;

/**
 * Where `runner build` (and `npm ci` in a checkout) builds the addon, and the first place a run looks for
 * it: SPMD_BUILD_DIR when set, so one checkout can hold a second build against another MPI (MPICH next to
 * Open MPI), each run picking its own; else native/build. A relative SPMD_BUILD_DIR is taken from the
 * package root, as the README writes it (`native/build-mpich`), whatever folder the run starts in.
 */
export const BUILD_DIR = GIVEN_BUILD_DIR ? path.resolve(PACKAGE_ROOT, GIVEN_BUILD_DIR) : path.join(PACKAGE_ROOT, "native/build");
/** The platform an addon is built for, as the packed package names its prebuilt one. */
export const PLATFORM = `${process.platform}-${process.arch}`;
const ADDON = "spmd_native.node";

/** The addon in use: where it was found and how it got there. */
export interface AddonSource {
  path: string;
  origin: "built here" | `prebuilt for ${string}`;
}

/**
 * Where an addon may be, best first: the one built on this machine (it has this machine's MPI and CUDA), then
 * the one the packed package carries for this platform.
 */
function addonCandidates(): AddonSource[] {
  return [
    { path: path.join(BUILD_DIR, "Release", ADDON), origin: "built here" },
    { path: path.join(PACKAGE_ROOT, "prebuilds", PLATFORM, ADDON), origin: `prebuilt for ${PLATFORM}` },
  ];
}

/** How the user runs the build: the installed command's name, else the checkout's `node runner`. */
export function buildCommandLine(): string {
  return path.basename(process.argv[1] ?? "") === "spmd-runner" ? "spmd-runner build" : "node runner build";
}

/** No addon that loads here (none built, none packed for this platform, or one missing a library). */
export class AddonMissingError extends Error {
  readonly exitCode = 2;
}

let loaded: { module: NativeModule; source: AddonSource } | undefined;

/**
 * UCX (under MPICH's ch4:ucx and Open MPI's pml/ucx) rewrites the code of libc's mmap, munmap, brk and sbrk
 * inside MPI_Init to keep its registration cache right. MPI_Init runs on the addon's MPI thread while Node's
 * main thread keeps allocating, so the rewrite races live calls: in 3 of 80 4-rank MPICH runs on a loaded
 * machine a rank lost heap pages under Node's garbage collector (SIGSEGV). UCX reads these settings when
 * the addon's libmpi loads it, so they are set before the addon is; a user's own settings win. Without the
 * hooks UCX registers memory per transfer instead of caching registrations.
 */
const UCX_WITHOUT_HOOKS = { UCX_MEM_MMAP_HOOK_MODE: "none", UCX_MEM_MALLOC_HOOKS: "no" };

function load(): { module: NativeModule; source: AddonSource } {
  for (const [name, value] of Object.entries(UCX_WITHOUT_HOOKS)) process.env[name] ??= value;
  const require = createRequire(import.meta.url);
  const refused: string[] = [];
  // A build the user named is the one meant: another (the packed one, another MPI's) would run unasked.
  const candidates = GIVEN_BUILD_DIR ? addonCandidates().slice(0, 1) : addonCandidates();
  for (const source of candidates) {
    if (!existsSync(source.path)) continue;
    try {
      return { module: require(source.path) as NativeModule, source };
    } catch (err) {
      // The loader's reason, e.g. "libmpi.so.40: cannot open shared object file": one line of it is enough.
      refused.push(`the addon ${source.origin} does not load: ${String((err as Error).message).split("\n")[0]}`);
    }
  }
  if (GIVEN_BUILD_DIR) {
    const why = refused.length ? `${refused[0]} (${BUILD_DIR})` : `no addon built in ${BUILD_DIR}`;
    throw new AddonMissingError(`SPMD_BUILD_DIR=${GIVEN_BUILD_DIR}: ${why}; build it with \`SPMD_BUILD_DIR=${GIVEN_BUILD_DIR} ${buildCommandLine()}\`, or unset SPMD_BUILD_DIR`);
  }
  const why = refused.length ? refused.join("; ") : `no native addon built or packed for ${PLATFORM}`;
  throw new AddonMissingError(`${why}; run \`${buildCommandLine()}\` (needs CMake and a C++ compiler)`);
}

export function native(): NativeModule {
  loaded ??= load();
  return loaded.module;
}

/** Where the loaded addon came from (loading it if need be). */
export function addonSource(): AddonSource {
  native();
  return loaded!.source;
}
