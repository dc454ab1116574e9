import type { NativeOpOf, NativeReduction } from "../comm/native.js";
import type { Job, ReduceOp, Stage } from "../config/job.js";

export interface PlanContext {
  readonly job: Job;
  readonly worldSize: number;
  /** How many groups run the stage at once (1 without a group). */
  readonly groups: number;
  /** Each rank's host, as the ranks found when they met (Topology.hostOf). */
  readonly hostOf: readonly number[];
  tensorIndex(name: string): number;
}

/** What the planner and the report need to know about one stage op. */
export interface StageKind<S extends Stage = Stage> {
  readonly op: S["op"];
  /** nccl-tests' bus-bandwidth factor: busbw = algbw × factor. */
  busFactor(worldSize: number, stage: S): number;
  /** Elements of the whole array the bandwidth refers to (nccl-tests' "count"). */
  count(stage: S, ctx: PlanContext): number;
  /** The op's kind and its kind's fields; the planner adds what every op carries (graph/plan.ts). */
  toNative(stage: S, ctx: PlanContext): NativeOpOf;
  /** The reduction a stage performs without a "reduce" field to declare it. */
  readonly redop?: ReduceOp;
  /** The stage estimates rather than computes its result: the report shows its error, not #wrong. */
  readonly estimates?: boolean;
  /**
   * For stages that run the exact collective instead where the tensor does not suit them: why they do at
   * this point (toNative then plans the exact op), or null when they do not.
   */
  fallback?(stage: S, ctx: PlanContext): string | null;
}

export const ringFactor = (w: number) => (w - 1) / w;
export const allreduceFactor = (w: number) => (2 * (w - 1)) / w;

export function inputCount(stage: { input: string }, ctx: PlanContext): number {
  return ctx.job.tensors[stage.input]!.count;
}

/** "mean" travels as a sum that native code divides once at the end. */
export function nativeReduction(reduce: "sum" | "mean" | "max" | "min"): NativeReduction {
  return reduce === "mean" ? { op: "sum", mean: true } : { op: reduce, mean: false };
}

/** The stage's one input tensor. */
export function nativeInput(stage: { input: string }, ctx: PlanContext): [number] {
  return [ctx.tensorIndex(stage.input)];
}

export const inPlace = (stage: { inPlace?: boolean }) => ({ inPlace: stage.inPlace ?? false });
