import type { NativeFill } from "../comm/native.js";
import type { Fill, Job } from "../config/job.js";
import type { Plan, PlannedStage, World } from "../plan.js";
import { stageKind, type PlanContext } from "../stages/index.js";
import { schedule } from "./schedule.js";
import { applyParams, type SweepPoint } from "./sweep.js";

function nativeFill(f: Fill): NativeFill {
  switch (f.kind) {
    case "normal": return { kind: f.kind, seed: f.seed, a: f.mean, b: f.std };
    case "uniform": case "integers": return { kind: f.kind, seed: f.seed, a: f.low, b: f.high };
    case "constant": return { kind: f.kind, seed: 0, a: f.value, b: 0 };
    case "rank": return { kind: f.kind, seed: 0, a: 0, b: 0 };
  }
}

/** Turns a validated job into the ordered native program every rank runs identically. */
export function plan(declared: Job, world: World, point: SweepPoint = { params: {} }): Plan {
  // validateGraph has tried every point, so the file name only matters if that was skipped.
  const { job, applied } = applyParams(declared, point.params, "job");
  const sweepCount = point.count;
  const names = Object.keys(job.tensors);
  const tensors = names.map((name) => {
    const t = job.tensors[name]!;
    return { name, dtype: t.dtype, count: sweepCount ?? t.count, fill: nativeFill(t.fill) };
  });
  const pointJob: Job = sweepCount === undefined ? job : {
    ...job,
    tensors: Object.fromEntries(names.map((n) => [n, { ...job.tensors[n]!, count: sweepCount }])),
  };
  const ctx: PlanContext = { job: pointJob, worldSize: world.size, hostOf: world.hostOf, tensorIndex: (name) => names.indexOf(name) };
  const order = schedule(job);
  const position = new Map(order.map((s, i) => [s.id, i]));
  const stages = order.map((stage): PlannedStage => {
    const kind = stageKind(stage);
    const input = "input" in stage && stage.input ? stage.input : "inputs" in stage ? stage.inputs?.[0] : undefined;
    const fallback = kind.fallback?.(stage, ctx);
    return {
      stage,
      kind,
      count: kind.count(stage, ctx),
      dtype: input ? pointJob.tensors[input]!.dtype : null,
      params: applied.get(stage.id),
      estimates: !!kind.estimates && !fallback,
      ...(fallback !== undefined && { fallback }),
    };
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
