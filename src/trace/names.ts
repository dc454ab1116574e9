// What both trace formats call things: c10d's collective names and c10's dtype names, mapped onto the job's.
import type { DType } from "../config/job.js";
import type { TraceOp } from "./model.js";

/** record_param_comms' collective names (ProcessGroupNCCL and friends) -> the op they replay as. */
const OPS: Record<string, TraceOp> = {
  allreduce: "allreduce", all_reduce: "allreduce", allreduce_coalesced: "allreduce", all_reduce_coalesced: "allreduce",
  broadcast: "broadcast",
  reduce: "reduce",
  allgather: "all_gather", all_gather: "all_gather", _allgather_base: "all_gather", _all_gather_base: "all_gather", allgather_coalesced: "all_gather",
  all_gather_coalesced: "all_gather",
  allgather_into_tensor_coalesced: "all_gather", all_gather_into_tensor: "all_gather",
  reduce_scatter: "reduce_scatter", _reduce_scatter_base: "reduce_scatter", reduce_scatter_tensor_coalesced: "reduce_scatter",
  reduce_scatter_tensor: "reduce_scatter",
  alltoall: "all_to_all", all_to_all: "all_to_all",
  alltoall_base: "all_to_allv", all_to_allv: "all_to_allv", alltoallv: "all_to_allv",
  gather: "gather", scatter: "scatter",
  send: "send", recv: "recv", recvanysource: "recv",
  barrier: "barrier",
};

/** Names that are not collectives to replay, and why they are left out. */
export const NOT_REPLAYED: Record<string, string> = {
  wait: "a wait: it orders the step (async collectives get a stream and an `after`), it moves no data",
  init: "process-group set-up, not part of the step",
  coalesced: "an NCCL group end (`coalesced`) records no sizes of its own; the collectives inside it are replayed",
};

/** Why a name that is no collective to replay is left out. */
export function notReplayed(name: string): string {
  return Object.hasOwn(NOT_REPLAYED, name) ? NOT_REPLAYED[name]! : `unknown collective ${JSON.stringify(name.length > 60 ? `${name.slice(0, 60)}...` : name)}`;
}

export function traceOp(name: string): TraceOp | undefined {
  const key = name.toLowerCase();
  return Object.hasOwn(OPS, key) ? OPS[key] : undefined;
}

/**
 * c10 ScalarType names (Kineto's `dtype`, ET's attr) and ET's tensor type names -> job dtypes. The job has no
 * 1- or 2-byte integer dtypes: those keep their bytes in float16 elements (job.ts halves 1-byte counts).
 */
const DTYPES: Record<string, DType> = {
  float: "float32", float32: "float32",
  half: "float16", "c10::half": "float16", float16: "float16",
  bfloat16: "bfloat16", "c10::bfloat16": "bfloat16",
  double: "float64", float64: "float64",
  long: "int64", "long int": "int64", int64: "int64",
  int: "int32", int32: "int32",
  short: "float16", int16: "float16",
  byte: "float16", "unsigned char": "float16", uint8: "float16",
  char: "float16", "signed char": "float16", int8: "float16",
  bool: "float16",
};

/** Bytes per element of the trace's dtype where it differs from the job dtype's (the 1-byte ones). */
export function traceElementBytes(name: string): 1 | undefined {
  return ["byte", "unsigned char", "uint8", "char", "signed char", "int8", "bool"].includes(canonical(name)) ? 1 : undefined;
}

/** "Tensor(c10::Half)" -> "c10::half"; "Float" -> "float". */
function canonical(name: string): string {
  return name.replace(/^Tensor\((.*)\)$/, "$1").trim().toLowerCase();
}

export function jobDtype(name: string): DType | undefined {
  const key = canonical(name);
  return Object.hasOwn(DTYPES, key) ? DTYPES[key] : undefined;
}

/** "0-4, 6, 8-63": a list of ranks as short as its runs allow, for messages. */
export function rankRanges(ranks: readonly number[]): string {
  const runs: string[] = [];
  for (let i = 0; i < ranks.length; ) {
    let j = i;
    while (j + 1 < ranks.length && ranks[j + 1] === ranks[j]! + 1) j++;
    runs.push(j - i >= 2 ? `${ranks[i]}-${ranks[j]}` : ranks.slice(i, j + 1).join(", "));
    i = j + 1;
  }
  return runs.join(", ");
}

/** A group's ranks from its first rank, stride and size (what Kineto keeps when it cuts the list). */
export function ranksFromStride(start: number, stride: number, size: number): number[] {
  // Callers check size against MAX_WORLD (limits.ts) first.
  return Array.from({ length: size }, (_, i) => start + i * stride);
}

/**
 * A rank from a file name: the number after "rank", "worker" or "gpu" ("worker3_step_12.json" -> 3), else the
 * last number ("dlrm_eg_3.json" -> 3).
 */
export function rankFromFileName(file: string): number | undefined {
  const base = file.split(/[\\/]/).at(-1)!;
  const named = /(?:rank|worker|gpu)[-_]?(\d+)/i.exec(base);
  const numbers = base.match(/\d+/g);
  const n = named ? Number(named[1]) : numbers ? Number(numbers.at(-1)) : undefined;
  return n !== undefined && Number.isSafeInteger(n) ? n : undefined;
}
