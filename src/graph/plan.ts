import type { NativeFill, NativeOp } from "../comm/native.js";
import type { Fill, Job, Stage } from "../config/job.js";
import type { Plan, PlannedStage, World } from "../plan.js";
import { stageKind, type PlanContext } from "../stages/index.js";
import { hostsOf, jobGroups, streamLanes, streamOf } from "./groups.js";
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

/**
 * Every group's partition for `world`, by name: the same at every sweep point (a point's params set no
 * groups), so a caller planning many points resolves them once, not W ranks' worth per point.
 */
export function worldGroups(job: Job, world: World): Map<string, number[][]> {
  return jobGroups(job, world.size, hostsOf(world.hostOf));
}

/** Turns a validated job into the ordered native program every rank runs identically. */
export function plan(declared: Job, world: World, point: SweepPoint = { params: {} }, groups = worldGroups(declared, world)): Plan {
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
  const partition = (s: Stage) => (s.group === undefined ? undefined : groups.get(s.group)!);
  // Inside a group the world is the group (validateGraph made every group of a stage's partition one size).
  // A hierarchical stage there treats the group as one node unless it names its layout: its members' hosts
  // differ from group to group, and the plan is the same for all.
  const contextOf = (s: Stage): PlanContext => {
    const worldSize = partition(s)?.[0]!.length ?? world.size;
    const hostOf = partition(s) ? new Array<number>(worldSize).fill(0) : world.hostOf;
    return { job: pointJob, worldSize, groups: partition(s)?.length ?? 1, hostOf, tensorIndex: (name) => names.indexOf(name) };
  };
  const order = schedule(job);
  const position = new Map(order.map((s, i) => [s.id, i]));
  const lanes = streamLanes(order);
  const laneOf = (s: Stage) => lanes.get(streamOf(s))!;
  const stages = order.map((stage): PlannedStage => {
    const kind = stageKind(stage);
    const ctx = contextOf(stage);
    const parts = partition(stage);
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
      stream: streamOf(stage),
      lane: laneOf(stage),
      groupSize: ctx.worldSize,
      ...(parts && { group: { name: stage.group!, count: parts.length } }),
      ...(job.source?.trace_us?.[stage.id] !== undefined && { traceUs: job.source.trace_us[stage.id] }),
    };
  });
  const ops = stages.map(({ stage, kind, lane }): NativeOp => ({
    stage: stage.id,
    ...kind.toNative(stage, contextOf(stage)),
    algorithm: stage.algorithm,
    lane,
    // Its own lane keeps order; what it waits for on other lanes it names (an op on a lane other than 0
    // completes where such a stage needs it, or at the step's end).
    waitFor: (stage.after ?? []).map((id) => position.get(id)!).filter((k) => laneOf(order[k]!) !== lane),
    groups: partition(stage) ?? null,
    timeoutSec: stage.timeoutSec ?? job.timeoutSec,
  }));
  return {
    program: { tensors, ops, warmup: job.warmup, iterations: job.iterations, check: job.check, timeoutSec: job.timeoutSec },
    stages,
  };
}
