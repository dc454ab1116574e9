// The ranks' traces, checked against each other and merged into one order every rank can run (a job is
// SPMD: each stage runs on every rank, a group's stage inside each group of its partition).
import type { RankTrace, TraceCollective } from "./model.js";
import { TraceError } from "./model.js";
import type { GroupPlan } from "./partition.js";

/** One collective of the step: what each rank whose trace was read did in it, by rank. */
export interface MergedCollective {
  key: string;
  /** The lowest rank that took part, whose record stands for the others'. */
  first: TraceCollective;
  byRank: Map<number, TraceCollective>;
}

/** The ranks a collective joins: its group's family, or for p2p the pair (sender first). */
function members(c: TraceCollective, rank: number, groups: GroupPlan): number[] {
  if (c.op === "send") return [rank, c.peer!];
  if (c.op === "recv") return [c.peer!, rank];
  return groups.familyRanks(c.group);
}

/** Keys that match one collective across ranks: the k-th on a group's family, the k-th from i to j. */
function keyed(trace: RankTrace, groups: GroupPlan): string[] {
  const seen = new Map<string, number>();
  return trace.collectives.map((c) => {
    const [from, to] = members(c, trace.rank, groups);
    const base = c.op === "send" || c.op === "recv" ? `p2p ${from}->${to}` : `group ${groups.familyOf(c.group)}`;
    const k = seen.get(base) ?? 0;
    seen.set(base, k + 1);
    return `${base} #${k}`;
  });
}

const describe = (c: TraceCollective) => `${c.name} of ${c.inCount} ${c.traceDtype}`;

/** A root as its group's index, the same in every group of a family. */
const localRoot = (c: TraceCollective) => (c.root === undefined ? undefined : [...c.group.ranks].sort((x, y) => x - y).indexOf(c.root));

/** What rank j's record must agree on with the first rank's (splits are checked pairwise, in checkSplits). */
function agree(a: TraceCollective, b: TraceCollective): boolean {
  const same = a.op === b.op && a.dtype === b.dtype && a.group.ranks.length === b.group.ranks.length && localRoot(a) === localRoot(b);
  if (!same) return false;
  if (a.op === "all_to_allv" || a.op === "send" || a.op === "recv") return true;
  return a.inCount === b.inCount && a.outCount === b.outCount;
}

/**
 * Merges the ranks' lists: a collective is taken when every rank read that takes part in it has it next, so
 * the order is one in which the traced ranks could all have run. Throws where two ranks' traces disagree.
 */
export function mergeRanks(traces: readonly RankTrace[], groups: GroupPlan): MergedCollective[] {
  const keys = traces.map((t) => keyed(t, groups));
  const present = new Set(traces.map((t) => t.rank));
  const next = traces.map(() => 0);
  const merged: MergedCollective[] = [];
  for (;;) {
    const progressed = traces.some((t, i) => {
      if (next[i] >= t.collectives.length) return false;
      const c = t.collectives[next[i]], key = keys[i][next[i]];
      const ready = members(c, t.rank, groups).filter((r) => present.has(r)).map((r) => traces.findIndex((u) => u.rank === r));
      if (!ready.every((j) => keys[j][next[j]] === key)) return false;
      const byRank = new Map(ready.map((j) => [traces[j].rank, traces[j].collectives[next[j]]!] as const));
      for (const j of ready) {
        const other = traces[j].collectives[next[j]]!;
        if (c.op !== "send" && c.op !== "recv" && !agree(c, other)) {
          throw new TraceError(traces[j].file, `ranks disagree at ${key}: rank ${t.rank} has ${describe(c)}, rank ${traces[j].rank} ${describe(other)}`);
        }
        next[j]++;
      }
      merged.push({ key, first: byRank.get(Math.min(...byRank.keys()))!, byRank });
      return true;
    });
    if (progressed) continue;
    const stuck = traces.findIndex((t, i) => next[i] < t.collectives.length);
    if (stuck < 0) return merged;
    const t = traces[stuck];
    throw new TraceError(t.file, `ranks disagree: rank ${t.rank}'s collective #${next[stuck]} (${describe(t.collectives[next[stuck]]!)}, ${keys[stuck][next[stuck]]}) has no match in the other ranks' traces`);
  }
}

/** all_to_allv: what i sends j must be what j receives from i, for every pair of ranks read. */
export function checkSplits(m: MergedCollective, traces: readonly RankTrace[]): void {
  const ranks = m.first.group.ranks;
  for (const [i, ci] of m.byRank) {
    for (const [j, cj] of m.byRank) {
      const sent = ci.inSplits?.[ranks.indexOf(j)], received = cj.outSplits?.[ranks.indexOf(i)];
      if (sent !== undefined && received !== undefined && sent !== received) {
        const file = traces.find((t) => t.rank === j)!.file;
        throw new TraceError(file, `ranks disagree at ${m.key} (${m.first.name}): rank ${i} sends rank ${j} ${sent} elements, rank ${j} receives ${received} from it`);
      }
    }
  }
}
