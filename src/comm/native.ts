// The native addon's surface, typed in one place (the only file that loads it).
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import path from "node:path";

export type NativeDType = "float32" | "float64" | "int32" | "int64" | "float16" | "bfloat16";
export type NativeOpKind =
  | "allreduce" | "reduce_scatter" | "all_gather" | "gather" | "broadcast" | "reduce"
  | "scatter" | "all_to_all" | "send_recv" | "barrier" | "compute";
export type NativeAlgorithm = "auto" | "ring" | "tree" | "direct" | "dissemination";

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

export interface NativeOp {
  stage: string;
  kind: NativeOpKind;
  inputs: number[];
  coalesced?: boolean;
  op?: "sum" | "max" | "min";
  mean?: boolean;
  root?: number;
  algorithm?: NativeAlgorithm;
  shift?: number;
  computeUs?: number;
  nonblocking?: boolean;
  waitFor?: number[];
  timeoutSec?: number;
}

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
  overallUs: Float64Array; // nonblocking: post to completion
  concurrentUs: Float64Array; // nonblocking: other ops' time while in flight
  wrong: number;
  checked: number;
}

export interface ShmOptions {
  backend: "shm";
  name: string;
  rank: number;
  size: number;
  create: boolean;
  channelBytes?: number;
}

export interface NativeCommunicator {
  readonly rank: number;
  readonly size: number;
  readonly backend: string;
  run(program: NativeProgram): Promise<NativeOpResult[]>;
  allreduceF64(data: Float64Array, op: "sum" | "max" | "min"): Promise<Float64Array>;
  /** Op `op`'s output on this rank after the last run. */
  output(op: number): { dtype: NativeDType; data: Buffer };
  /** Tensor `index` (program order) as the last run filled it on this rank. */
  tensor(index: number): { dtype: NativeDType; data: Buffer };
  /** Drops names other processes could still attach to (the shm segment's); idempotent. */
  release(): void;
  close(): void;
}

/** Errors from native code carry one of these codes. */
export type NativeErrorCode =
  | "ERR_SPMD_INVALID" | "ERR_SPMD_TIMEOUT" | "ERR_SPMD_PEER_GONE"
  | "ERR_SPMD_SYSTEM" | "ERR_SPMD_UNSUPPORTED" | "ERR_SPMD_ABORTED";

interface NativeModule {
  Communicator: new (options: ShmOptions) => NativeCommunicator;
  backends: string[];
}

const addonPath = path.join(path.dirname(fileURLToPath(import.meta.url)), "../../native/build/Release/spmd_native.node");

let loaded: NativeModule | undefined;

export function native(): NativeModule {
  loaded ??= createRequire(import.meta.url)(addonPath) as NativeModule;
  return loaded;
}
