// A trace's process groups as the job's: a job group is a partition of every rank (graph/groups.ts), each
// group of one size, so a process group that leaves ranks out is completed with the trace's other groups of
// its size that it does not overlap, and then with the remaining ranks in order.
import type { MergedCollective } from "./merge.js";
import type { RankTrace, TraceGroup } from "./model.js";
import { TraceError } from "./model.js";
import { rankRanges } from "./names.js";

export interface Partitions {
  /** Job group name -> its explicit partition. */
  groups: Map<string, number[][]>;
  notes: string[];
  /** The job group a process group runs in; undefined for the whole world in rank order. */
  of(group: TraceGroup): string | undefined;
}

const isWorld = (ranks: readonly number[], W: number) => ranks.length === W && [...ranks].sort((a, b) => a - b).every((r, i) => r === i);

/** "pg_0", "pg_tp.1": a usable group name from the trace's. */
function jobName(name: string): string {
  return `pg_${name.replace(/[^A-Za-z0-9_.-]/g, "_")}`;
}

function complete(g: TraceGroup, others: TraceGroup[], W: number, notes: string[]): number[][] {
  const G = g.ranks.length;
  const parts = [[...g.ranks].sort((a, b) => a - b)];
  const used = new Set(g.ranks);
  for (const h of others) {
    if (h.ranks.length === G && h.ranks.every((r) => !used.has(r)) && new Set(h.ranks).size === G) {
      parts.push([...h.ranks].sort((a, b) => a - b));
      h.ranks.forEach((r) => used.add(r));
    }
  }
  const rest = Array.from({ length: W }, (_, r) => r).filter((r) => !used.has(r));
  if (rest.length % G !== 0) return [];
  const filled: number[][] = [];
  for (let i = 0; i < rest.length; i += G) filled.push(rest.slice(i, i + G));
  if (filled.length) notes.push(`process group "${g.name}" of ${G} ranks: ranks ${rankRanges(rest)} (in no traced group of its size) run its collectives too, in ${filled.length} group${filled.length > 1 ? "s" : ""} of ${G} in rank order (a job group partitions every rank)`);
  return [...parts, ...filled].sort((a, b) => a[0]! - b[0]!);
}

export function partitions(merged: MergedCollective[], traces: RankTrace[], W: number): Partitions {
  const groups = new Map<string, number[][]>(), byTrace = new Map<string, string>(), notes: string[] = [];
  const known = new Map<string, TraceGroup>();
  for (const t of traces) for (const g of t.groups) known.set(g.name, g);
  for (const m of merged) known.set(m.first.group.name, m.first.group);
  for (const m of merged) {
    const g = m.first.group;
    if (isWorld(g.ranks, W) || byTrace.has(g.name) || m.first.op === "send" || m.first.op === "recv") continue;
    const parts = complete(g, [...known.values()].filter((h) => h.name !== g.name), W, notes);
    if (parts.length === 0) {
      const file = traces.find((t) => m.byRank.has(t.rank))?.file ?? traces[0].file;
      throw new TraceError(file, `process group "${g.name}" of ${g.ranks.length} ranks [${rankRanges(g.ranks)}] cannot be completed into groups of ${g.ranks.length} over ${W} ranks`);
    }
    groups.set(jobName(g.name), parts);
    byTrace.set(g.name, jobName(g.name));
  }
  return { groups, notes, of: (g) => byTrace.get(g.name) };
}
