// A step of concurrent stages against the same stages run alone (DESIGN.md, "Graphs, streams and groups"):
// step time, Σ and max of the solo times, overlap % and the critical path.
import type { NativeCommunicator, NativeOpResult, NativeProgram } from "../comm/native.js";
import type { Plan } from "../plan.js";
import type { GraphMetric } from "../results.js";
import { mean, timeStats } from "./stats.js";

// Medians: a step or a solo run that a busy machine stretched must not move the figures much.
const median = (a: ArrayLike<number>) => timeStats(a).p50_us;

/** Timed steps of the untimed calibration pass at most: enough for a stable median, cheap. */
const SOLO_STEPS = 5;

/** Whether the plan's stages run on more than one stream. */
export function isConcurrent(plan: Plan): boolean {
  return plan.stages.some((s) => s.lane !== 0);
}

/**
 * The same ops, every one on lane 0 in schedule order, so each runs alone; nothing checked. `timed` (--solo):
 * over the job's own warmup and iterations, so the solo medians rest on as many steps as the step's; else a
 * calibration pass of SOLO_STEPS at most, cheap next to the job.
 */
export function soloProgram(program: NativeProgram, timed = false): NativeProgram {
  const ops = program.ops.map((op) => ({ ...op, lane: 0, waitFor: [] }));
  const steps = timed ? { warmup: program.warmup, iterations: program.iterations } : { warmup: Math.max(1, program.warmup), iterations: Math.min(SOLO_STEPS, program.iterations) };
  return { ...program, ops, ...steps, check: false };
}

/** Per op, per step: the slowest rank's values of `pick`, op-major. */
async function slowest(comm: NativeCommunicator, results: NativeOpResult[], pick: (r: NativeOpResult, k: number) => number, steps: number, timeoutSec: number) {
  const mine = new Float64Array(results.length * steps);
  results.forEach((r, i) => { for (let k = 0; k < steps; k++) mine[i * steps + k] = pick(r, k); });
  return comm.allreduceF64(mine, "max", timeoutSec, "(report: graph)");
}

/** The stages the last one to finish waited for, back to the step's start: each time the latest to end. */
function criticalPath(plan: Plan, end: number[]): string[] {
  const ids = plan.stages.map((s) => s.stage.id);
  const before = plan.stages.map(({ stage, stream }, i) => {
    const sameStream = plan.stages.slice(0, i).map((s, k) => (s.stream === stream ? k : -1));
    return [Math.max(-1, ...sameStream), ...(stage.after ?? []).map((id) => ids.indexOf(id))].filter((k) => k >= 0);
  });
  const path: number[] = [];
  for (let i = end.indexOf(Math.max(...end)); i >= 0; ) {
    path.unshift(i);
    i = before[i]!.reduce((best, k) => (best < 0 || end[k]! > end[best]! ? k : best), -1);
  }
  return path.map((i) => ids[i]!);
}

/** Collective: every rank calls it with its results of the step loop and of the solo pass. */
export async function graphMetric(comm: NativeCommunicator, plan: Plan, results: NativeOpResult[], solo: NativeOpResult[]): Promise<GraphMetric> {
  const { iterations, timeoutSec } = plan.program;
  const ends = await slowest(comm, results, (r, k) => r.startUs[k]! + r.timeUs[k]!, iterations, timeoutSec);
  const soloSteps = solo[0]?.timeUs.length ?? 0;
  const soloTimes = await slowest(comm, solo, (r, k) => r.timeUs[k]!, soloSteps, timeoutSec);
  const perOp = (a: Float64Array, steps: number) => plan.stages.map((_, i) => a.subarray(i * steps, (i + 1) * steps));
  const stepUs = median(Array.from({ length: iterations }, (_, k) => Math.max(...perOp(ends, iterations).map((e) => e[k]!))));
  const soloUs = perOp(soloTimes, soloSteps).map(median);
  const soloSum = soloUs.reduce((a, b) => a + b, 0);
  const soloMax = Math.max(...soloUs);
  // 100: the step took as long as its longest stage alone; 0: as long as all of them one after another.
  // Clamped, as OSU's figure is (metrics/overlap.ts): timing noise can put a step just outside that range.
  const overlap = soloSum > soloMax ? Math.min(100, Math.max(0, (100 * (soloSum - stepUs)) / (soloSum - soloMax))) : 0;
  return {
    step_us: stepUs,
    solo_sum_us: soloSum,
    solo_max_us: soloMax,
    solo_steps: soloSteps,
    overlap_pct: overlap,
    critical_path: criticalPath(plan, perOp(ends, iterations).map(mean)),
  };
}
