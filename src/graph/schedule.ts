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
  return lowestFirstOrder(stages.map((s) => (s.after ?? []).flatMap((id) => indexOf.get(id) ?? [])));
}

/**
 * Kahn's algorithm over items 0..n-1 where item i follows each of deps[i], the lowest ready index first (a heap):
 * linear in the items and their deps, so an imported trace of 100k stages orders in milliseconds. Items in (or
 * behind) a cycle are left out; deps out of range are ignored. Shared by the schedule and the trace readers.
 */
export function lowestFirstOrder(deps: readonly (readonly number[])[]): number[] {
  const pending = deps.map(() => 0);
  const dependents: number[][] = deps.map(() => []);
  deps.forEach((list, i) => {
    const unique = new Set(list.filter((d) => d >= 0 && d < deps.length));
    pending[i] = unique.size;
    for (const d of unique) dependents[d]!.push(i);
  });
  const heap: number[] = [];
  const push = (x: number) => {
    let i = heap.push(x) - 1;
    while (i > 0) {
      const up = (i - 1) >> 1;
      if (heap[up]! <= x) break;
      heap[i] = heap[up]!;
      i = up;
    }
    heap[i] = x;
  };
  const pop = (): number => {
    const top = heap[0]!, last = heap.pop()!;
    if (heap.length > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1, r = l + 1;
        let m = i, v = last;
        if (l < heap.length && heap[l]! < v) [m, v] = [l, heap[l]!];
        if (r < heap.length && heap[r]! < v) m = r;
        if (m === i) break;
        heap[i] = heap[m]!;
        i = m;
      }
      heap[i] = last;
    }
    return top;
  };
  pending.forEach((n, i) => n === 0 && push(i));
  const order: number[] = [];
  while (heap.length) {
    const next = pop();
    order.push(next);
    for (const d of dependents[next]!) if (--pending[d]! === 0) push(d);
  }
  return order;
}

/** The order one step runs the stages in; the job must have passed validateGraph. */
export function schedule(job: Job): Stage[] {
  const order = topologicalOrder(job.stages);
  if (order.length < job.stages.length) throw new Error("schedule: the stages' `after` lists form a cycle; validate the job first");
  return order.map((i) => job.stages[i]);
}
