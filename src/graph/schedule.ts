import type { Job, Stage } from "../config/job.js";

/**
 * Stage indices in execution order: Kahn's algorithm, always taking the earliest-declared
 * ready stage, so every rank derives the same order from the same job. Edges come from
 * `after` only. Stages caught in (or behind) a cycle are left out; unknown ids are ignored
 * (validateGraph reports both).
 */
export function topologicalOrder(stages: readonly Stage[]): number[] {
  const indexOf = new Map<string, number>();
  stages.forEach((s, i) => indexOf.has(s.id) || indexOf.set(s.id, i));
  const waitingOn = stages.map((s) => new Set((s.after ?? []).flatMap((id) => indexOf.get(id) ?? [])));
  const done = stages.map(() => false);
  const order: number[] = [];
  for (;;) {
    const next = waitingOn.findIndex((deps, i) => !done[i] && deps.size === 0);
    if (next < 0) return order;
    done[next] = true;
    order.push(next);
    for (const deps of waitingOn) deps.delete(next);
  }
}

/** The order one step runs the stages in; the job must have passed validateGraph. */
export function schedule(job: Job): Stage[] {
  const order = topologicalOrder(job.stages);
  if (order.length < job.stages.length) throw new Error("schedule: the stages' `after` lists form a cycle; validate the job first");
  return order.map((i) => job.stages[i]);
}
