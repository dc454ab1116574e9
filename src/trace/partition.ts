// A trace's process groups as the job's: a job group is a partition of every rank (graph/groups.ts), each
// group of one size, so a process group that leaves ranks out is completed with the trace's other groups of
// its size that it does not overlap, and then with the remaining ranks in order. Process groups completed
// into the same partition (tensor-parallel [0,1] and [2,3]) are one family: their k-th collectives are one
// stage, run in every group of it at once, as the step ran them.
import type { RankTrace, TraceGroup } from "./model.js";
import { TraceError } from "./model.js";
import { minOf } from "./limits.js";
import { rankRanges } from "./names.js";

export interface GroupPlan {
  /** The family a process group belongs to (its own name where it is alone, or on the whole world). */
  familyOf(group: TraceGroup): string;
  /** The ranks of every traced group of that family: those that take part in its collectives. */
  familyRanks(group: TraceGroup): number[];
  /** The job group a process group's collectives run in, or undefined on the whole world; `file` for errors. */
  jobGroup(group: TraceGroup, file: string): string | undefined;
  /** The job groups used so far: name -> explicit partition. */
  readonly groups: Map<string, number[][]>;
  readonly notes: string[];
}

const SORTED = new WeakMap<readonly number[], { sorted: number[]; index: Map<number, number> }>();

/** A group's ranks in order, and each rank's index among them: made once per group. */
export function ordered(ranks: readonly number[]): { sorted: number[]; index: Map<number, number> } {
  let o = SORTED.get(ranks);
  if (!o) {
    const sorted = [...ranks].sort((a, b) => a - b);
    SORTED.set(ranks, (o = { sorted, index: new Map(sorted.map((r, i) => [r, i] as const)) }));
  }
  return o;
}

const isWorld = (ranks: readonly number[], W: number) => ranks.length === W && ordered(ranks).sorted.every((r, i) => r === i);

const sorted = (ranks: readonly number[]) => ordered(ranks).sorted.slice();

/** The partition `g` completes into, and the ranks no traced group of its size held; undefined where it cannot. */
function complete(g: TraceGroup, others: readonly TraceGroup[], W: number): { parts: number[][]; filled: number[] } | undefined {
  const G = g.ranks.length;
  const parts = [sorted(g.ranks)];
  const used = new Set(g.ranks);
  for (const h of others) {
    if (h.ranks.length === G && new Set(h.ranks).size === G && h.ranks.every((r) => !used.has(r) && r < W)) {
      parts.push(sorted(h.ranks));
      h.ranks.forEach((r) => used.add(r));
    }
  }
  const filled = Array.from({ length: W }, (_, r) => r).filter((r) => !used.has(r));
  if (filled.length % G !== 0) return undefined;
  for (let i = 0; i < filled.length; i += G) parts.push(filled.slice(i, i + G));
  return { parts: parts.sort((a, b) => a[0]! - b[0]!), filled };
}

/** Every process group the traces name, by name (the process-group tables first, then the collectives'). */
function knownGroups(traces: readonly RankTrace[]): TraceGroup[] {
  const known = new Map<string, TraceGroup>();
  for (const t of traces) for (const g of t.groups) if (!known.has(g.name)) known.set(g.name, g);
  for (const t of traces) for (const c of t.collectives) if (!known.has(c.group.name)) known.set(c.group.name, c.group);
  const first = new Map([...known.values()].map((g) => [g, minOf(g.ranks)] as const));
  return [...known.values()].sort((a, b) => first.get(a)! - first.get(b)! || a.name.localeCompare(b.name));
}

export function planGroups(traces: readonly RankTrace[], W: number): GroupPlan {
  const known = knownGroups(traces);
  const completion = new Map(known.map((g) => [g.name, isWorld(g.ranks, W) ? undefined : complete(g, known.filter((h) => h.name !== g.name), W)] as const));
  // Groups with the same partition are one family, named after its members.
  const members = new Map<string, string[]>();
  for (const g of known) {
    const c = completion.get(g.name);
    if (c) members.set(JSON.stringify(c.parts), [...(members.get(JSON.stringify(c.parts)) ?? []), g.name]);
  }
  const family = new Map<string, string>(), ranksOf = new Map<string, number[]>();
  const byName = new Map(known.map((g) => [g.name, g]));
  for (const names of members.values()) {
    for (const n of names) family.set(n, names.join("+"));
    // Two process groups of one rank list (tensor-parallel and tensor-and-context-parallel) list each rank once.
    ranksOf.set(names.join("+"), sorted([...new Set(names.flatMap((n) => byName.get(n)!.ranks))]));
  }
  const groups = new Map<string, number[][]>(), notes: string[] = [];
  return {
    groups,
    notes,
    familyOf: (g) => family.get(g.name) ?? g.name,
    familyRanks: (g) => ranksOf.get(family.get(g.name) ?? "") ?? g.ranks,
    jobGroup(g, file) {
      if (isWorld(g.ranks, W)) return undefined;
      const c = completion.get(g.name) ?? complete(g, [], W);
      if (!c) throw new TraceError(file, `process group "${g.name}" of ${g.ranks.length} ranks [${rankRanges(g.ranks)}] cannot be completed into groups of ${g.ranks.length} over ${W} ranks`);
      const name = `pg_${(family.get(g.name) ?? g.name).replace(/[^A-Za-z0-9_.-]/g, "_")}`;
      if (!groups.has(name) && c.filled.length) {
        notes.push(`process group "${g.name}" of ${g.ranks.length} ranks: ranks ${rankRanges(c.filled)} (in no traced group of its size) run its collectives too, in groups of ${g.ranks.length} in rank order (a job group partitions every rank)`);
      }
      groups.set(name, c.parts);
      return name;
    },
  };
}
