// The neutral form every trace reader produces (DESIGN.md, "Trace import"): one list of collectives per rank,
// in the rank's order, with ranks already global. The job writer (job.ts) reads only this.
import type { DType } from "../config/job.js";

/** The ops a trace's collectives become (the job's stage ops, with all_to_allv and the p2p pair). */
export type TraceOp =
  | "allreduce" | "broadcast" | "reduce" | "all_gather" | "reduce_scatter" | "all_to_all" | "all_to_allv"
  | "gather" | "scatter" | "send" | "recv" | "barrier" | "compute";

/** A process group as the trace names it, with its ranks in world numbering (group-local index = position). */
export interface TraceGroup {
  name: string;
  ranks: number[];
}

export interface TraceCollective {
  op: TraceOp;
  /** The trace's own name ("_allgather_base", "allreduce_coalesced"...), for messages and the summary. */
  name: string;
  dtype: DType;
  /** The trace's dtype name ("Float", "Byte"), kept for the source block where the mapping is not exact. */
  traceDtype: string;
  /** Elements this rank sends and receives in total, as the trace records them. */
  inCount: number;
  outCount: number;
  /** Several tensors in one call (coalesced): each one's elements. */
  pieces?: number[];
  /** all_to_allv: elements to (in) and from (out) each rank of the group, in group order. */
  inSplits?: number[];
  outSplits?: number[];
  group: TraceGroup;
  /** Rooted ops: the root; send/recv: the peer. World ranks. */
  root?: number;
  peer?: number;
  /** send/recv: the trace's tag (Chakra's comm_tag), which pairs a send with its receive where present. */
  tag?: number;
  /**
   * send/recv: the indices in this rank's list of what it waits for (Chakra's data and control dependencies).
   * Undefined: everything before the run of sends and receives it is in (a trace that records no dependencies).
   */
  after?: number[];
  /** Where the trace holds it ("node 12 (COMM_SEND_NODE_tb0_step3)"), for messages. */
  node?: string;
  /**
   * What `runner trace export` carries as node attributes where Chakra has no field (DESIGN.md, "Trace import"):
   * the job's op (igather, quantized_allreduce...), reduce op, stream, the op's other options, each input
   * tensor's count, and the stages it waits for (`after`) as indices in this rank's list.
   */
  stage?: { op?: string; reduce?: string; stream?: string; options?: Record<string, unknown>; tensorCounts?: number[]; after?: number[] };
  inPlace: boolean;
  /** The trace's sequence number, which a later wait names. */
  seq?: number;
  /** Waited on later (an async collective): the job runs it on a stream of its own. */
  async: boolean;
  /** Index of the first collective after its wait in this rank's list (async only); undefined: none follows. */
  waitedBefore?: number;
  /** The trace's duration of the collective (Kineto's kernel `dur`), and its start (for compute gaps). */
  durUs?: number;
  tsUs?: number;
  /** The profiled step it ran in (ProfilerStep#N): ET by node id, Kineto by time; undefined where unmarked. */
  step?: number;
}

/**
 * A rank's output for `input` elements in, where a trace records only the input (Chakra's comm_size, the
 * pre-2.2 nccl:<op> annotations), as ASTRA-sim reads comm_size (astra-sim/system/collective/Ring.cc, and its
 * other algorithms alike): all-gather's (and gather's) output is G times it, reduce-scatter's (and scatter's) a
 * G-th, every other op's the same. G is the group's size, known for a world-wide group once every trace is read.
 */
export function outputOf(op: TraceOp, input: number, G: number): number {
  if (op === "all_gather" || op === "gather") return input * G;
  if (op === "reduce_scatter" || op === "scatter") return Math.floor(input / Math.max(G, 1));
  return input;
}

/** A trace's step marks (ProfilerStep#N), in order, and those it did not record whole. */
export interface StepInfo {
  numbers: number[];
  /** Steps the trace cut short (Kineto: a step event without its end). */
  incomplete: number[];
  /** Collectives before the first mark (set-up: process-group init, DDP's first broadcasts). */
  before: number;
}

export interface Dropped {
  what: string;
  why: string;
  /** The step it was in, where the trace marks steps. */
  step?: number;
}

/** One rank's trace, read. */
export interface RankTrace {
  file: string;
  format: "pytorch-et" | "kineto" | "chakra" | "flight-recorder";
  schema: string;
  rank: number;
  /** How the rank was found ("the trace's distributedInfo", "the file name"...). */
  rankFrom: string;
  worldSize: number;
  groups: TraceGroup[];
  collectives: TraceCollective[];
  dropped: Dropped[];
  notes: string[];
  steps?: StepInfo;
}

/**
 * Text from a file or a file name, made safe for one terminal line: control bytes (C0, DEL, C1, the Unicode
 * line and paragraph separators, bidi overrides) written as \xNN / \uNNNN, and cut to `max` characters.
 */
export function printable(text: string, max = 400): string {
  const cut = text.length > max ? `${text.slice(0, max)}...` : text;
  return cut.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g, (c) => {
    const code = c.charCodeAt(0);
    return code < 0x100 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
  });
}

/** A value from the file quoted for a message: JSON for strings, short, printable. */
export function quoted(value: unknown, max = 60): string {
  const text = typeof value === "string" ? value : value === undefined ? "undefined" : typeof value === "object" ? (Array.isArray(value) ? "a list" : value === null ? "null" : "an object") : String(value);
  return printable(JSON.stringify(text.length > max ? `${text.slice(0, max)}...` : text), max + 20);
}

/** Bad input: one line naming the file and what is wrong (exit 2), with nothing unprintable from the file. */
export class TraceError extends Error {
  readonly exitCode = 2;
  constructor(file: string, detail: string) {
    super(printable(`${file}: ${detail}`, 1000));
    this.name = "TraceError";
  }
}
