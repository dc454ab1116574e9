import type { NativeFill, NativeProgram } from "../comm/native.js";
import { sweepRangePoints, type DType, type Fill, type Job, type Stage } from "../config/job.js";
import { stageKind, type PlanContext, type StageKind } from "../stages/index.js";
import { schedule } from "./schedule.js";

export interface PlannedStage {
  readonly stage: Stage;
  readonly kind: StageKind;
  /** Elements of the whole array the bandwidth refers to. */
  readonly count: number;
  /** The dtype of the stage's tensors, or null for barrier/compute. */
  readonly dtype: DType | null;
}

export interface Plan {
  readonly program: NativeProgram;
  readonly stages: readonly PlannedStage[];
}

function nativeFill(f: Fill): NativeFill {
  switch (f.kind) {
    case "normal": return { kind: f.kind, seed: f.seed, a: f.mean, b: f.std };
    case "uniform": case "integers": return { kind: f.kind, seed: f.seed, a: f.low, b: f.high };
    case "constant": return { kind: f.kind, seed: 0, a: f.value, b: 0 };
    case "rank": return { kind: f.kind, seed: 0, a: 0, b: 0 };
  }
}

/** The counts a job's sweep visits (one point, undefined, when it has none). */
export function sweepPoints(job: Job): (number | undefined)[] {
  const count = job.sweep?.count;
  if (!count) return [undefined];
  return Array.isArray(count) ? count : sweepRangePoints(count.from, count.to, count.factor);
}

/** Turns a validated job into the ordered native program every rank runs identically. */
export function plan(job: Job, worldSize: number, sweepCount?: number): Plan {
  const names = Object.keys(job.tensors);
  const tensors = names.map((name) => {
    const t = job.tensors[name]!;
    return { name, dtype: t.dtype, count: sweepCount ?? t.count, fill: nativeFill(t.fill) };
  });
  const pointJob: Job = sweepCount === undefined ? job : {
    ...job,
    tensors: Object.fromEntries(names.map((n) => [n, { ...job.tensors[n]!, count: sweepCount }])),
  };
  const ctx: PlanContext = { job: pointJob, worldSize, tensorIndex: (name) => names.indexOf(name) };
  const order = schedule(job);
  const position = new Map(order.map((s, i) => [s.id, i]));
  const stages = order.map((stage): PlannedStage => {
    const kind = stageKind(stage);
    const input = "input" in stage && stage.input ? stage.input : "inputs" in stage ? stage.inputs?.[0] : undefined;
    return { stage, kind, count: kind.count(stage, ctx), dtype: input ? pointJob.tensors[input]!.dtype : null };
  });
  const ops = stages.map(({ stage, kind }) => ({
    stage: stage.id,
    ...kind.toNative(stage, ctx),
    // A nonblocking op completes where a stage that runs after it needs it (or at the step's end).
    waitFor: (stage.after ?? []).filter((id) => order[position.get(id)!]!.op === "igather").map((id) => position.get(id)!),
    timeoutSec: stage.timeoutSec ?? job.timeoutSec,
  }));
  return {
    program: { tensors, ops, warmup: job.warmup, iterations: job.iterations, check: job.check, timeoutSec: job.timeoutSec },
    stages,
  };
}
