import { ConfigError, formatJsonPath } from "../config/errors.js";
import { stageSchema, sweepRangePoints, type Job, type Stage } from "../config/job.js";
import type { ParamValue } from "../plan.js";

/** One point of a sweep: a count for every tensor (or the declared ones) and stage options to set. */
export interface SweepPoint {
  count?: number;
  params: Record<string, ParamValue>;
}

function counts(job: Job): (number | undefined)[] {
  const count = job.sweep?.count;
  if (!count) return [undefined];
  return Array.isArray(count) ? count : sweepRangePoints(count.from, count.to, count.factor);
}

/** Every combination of the sweep's counts and parameter values, counts outermost (one point without a sweep). */
export function sweepPoints(job: Job): SweepPoint[] {
  let combos: Record<string, ParamValue>[] = [{}];
  for (const [key, values] of Object.entries(job.sweep?.params ?? {})) {
    combos = combos.flatMap((c) => values.map((v) => ({ ...c, [key]: v })));
  }
  return counts(job).flatMap((count) => combos.map((params) => ({ count, params })));
}

const withOption = (stage: Stage, option: string, value: ParamValue) => stageSchema.safeParse({ ...stage, [option]: value });

/**
 * The job with a point's stage options set, and for each stage the options set on it. A bare key goes to
 * every stage whose schema accepts the value; "<id>.<option>" must fit that stage. Misfits are ConfigErrors.
 */
export function applyParams(job: Job, params: Record<string, ParamValue>, file: string): { job: Job; applied: Map<string, Record<string, ParamValue>> } {
  const applied = new Map<string, Record<string, ParamValue>>();
  let stages = job.stages;
  const where = (key: string) => formatJsonPath(["sweep", "params", key]);
  for (const [key, value] of Object.entries(params)) {
    const dot = key.indexOf(".");
    const target = dot >= 0 ? key.slice(0, dot) : undefined;
    const option = dot >= 0 ? key.slice(dot + 1) : key;
    if (target !== undefined && !stages.some((s) => s.id === target)) {
      throw new ConfigError(file, where(key), `no stage "${target}" (stages: ${stages.map((s) => s.id).join(", ")})`);
    }
    let fits = 0;
    stages = stages.map((stage) => {
      if (target !== undefined && stage.id !== target) return stage;
      const parsed = withOption(stage, option, value);
      if (!parsed.success) {
        if (target === undefined) return stage;
        throw new ConfigError(file, where(key), `${JSON.stringify(value)} does not fit stage "${target}": ${parsed.error.issues[0]?.message ?? "invalid"}`);
      }
      fits++;
      applied.set(stage.id, { ...applied.get(stage.id), [option]: value });
      return parsed.data;
    });
    if (fits === 0) throw new ConfigError(file, where(key), `${JSON.stringify(value)} fits no stage's "${option}"`);
  }
  return { job: { ...job, stages }, applied };
}
