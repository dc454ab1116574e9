// The ranks' traces, checked against each other and merged into one order every rank can run (a job is
// SPMD: each stage runs on every rank, a group's stage inside each group of its partition).
import type { RankTrace, TraceCollective } from "./model.js";
import { TraceError } from "./model.js";
import { minOf } from "./limits.js";
import { isP2p, pairTransfers, readyTransfers, roundStages, type Transfer } from "./p2p.js";
import { ordered, type GroupPlan } from "./partition.js";

/** One collective of the step: what each rank whose trace was read did in it, by rank. */
export interface MergedCollective {
  key: string;
  /** The lowest rank that took part, whose record stands for the others'. */
  first: TraceCollective;
  byRank: Map<number, TraceCollective>;
  /** Sends and receives of one round: the shift every send in it goes by, and how many sends it holds. */
  p2p?: { shift: number; sends: number };
}

/** The ranks a collective joins: its group's family, or for p2p the pair (sender first). */
function members(c: TraceCollective, rank: number, groups: GroupPlan): number[] {
  if (c.op === "send") return [rank, c.peer!];
  if (c.op === "recv") return [c.peer!, rank];
  return groups.familyRanks(c.group);
}

/** The traces (by index) that take part in a collective: those of its members that were read. */
function reader(traces: readonly RankTrace[], groups: GroupPlan): (c: TraceCollective, rank: number) => number[] {
  const byRank = new Map(traces.map((t, i) => [t.rank, i] as const));
  const family = new Map<string, number[]>();
  const among = (ranks: readonly number[]) => {
    // The smaller side is walked: the traces read, or the group's ranks.
    if (ranks.length <= traces.length) return ranks.filter((r) => byRank.has(r)).map((r) => byRank.get(r)!);
    const set = new Set(ranks);
    return traces.map((t, i) => (set.has(t.rank) ? i : -1)).filter((i) => i >= 0);
  };
  return (c, rank) => {
    if (c.op === "send" || c.op === "recv") return among(members(c, rank, groups));
    const key = groups.familyOf(c.group);
    let known = family.get(key);
    if (!known) family.set(key, (known = among(groups.familyRanks(c.group))));
    return known;
  };
}

/** Keys that match one collective across ranks: the k-th on a group's family, the k-th from i to j. */
function keyed(trace: RankTrace, groups: GroupPlan): string[] {
  const seen = new Map<string, number>();
  return trace.collectives.map((c) => {
    const [from, to] = members(c, trace.rank, groups);
    const base = isP2p(c) ? `p2p ${from}->${to}${c.tag === undefined ? "" : ` tag ${c.tag}`}` : `group ${groups.familyOf(c.group)}`;
    const k = seen.get(base) ?? 0;
    seen.set(base, k + 1);
    return `${base} #${k}`;
  });
}

const describe = (c: TraceCollective) => `${c.name} of ${c.inCount} ${c.traceDtype}`;

/** A root as its group's index, the same in every group of a family. */
const localRoot = (c: TraceCollective) => (c.root === undefined ? undefined : ordered(c.group.ranks).index.get(c.root));

/** What rank j's record must agree on with the first rank's (splits are checked pairwise, in checkSplits). */
function agree(a: TraceCollective, b: TraceCollective): boolean {
  const same = a.op === b.op && a.dtype === b.dtype && a.group.ranks.length === b.group.ranks.length && localRoot(a) === localRoot(b);
  if (!same) return false;
  if (a.op === "all_to_allv") return true;
  return a.inCount === b.inCount && a.outCount === b.outCount;
}

/**
 * Merges the ranks' lists: a collective is taken when every rank read that takes part in it has it next, so
 * the order is one in which the traced ranks could all have run; where none is, a round of the sends and
 * receives free to run (p2p.ts). Throws where two ranks' traces disagree.
 */
export function mergeRanks(traces: readonly RankTrace[], groups: GroupPlan): MergedCollective[] {
  const keys = traces.map((t) => keyed(t, groups));
  const taking = reader(traces, groups);
  const transfers = pairTransfers(traces, keys);
  const done = traces.map((t) => new Uint8Array(t.collectives.length));
  const next = traces.map(() => 0);
  const take = (j: number, n: number) => {
    done[j]![n] = 1;
    while (next[j]! < traces[j]!.collectives.length && done[j]![next[j]!]) next[j]!++;
  };
  const merged: MergedCollective[] = [];
  for (;;) {
    const progressed = traces.some((t, i) => {
      if (next[i] >= t.collectives.length) return false;
      const c = t.collectives[next[i]], key = keys[i][next[i]];
      if (isP2p(c)) return false;
      const ready = taking(c, t.rank);
      if (!ready.every((j) => keys[j][next[j]] === key)) return false;
      const byRank = new Map(ready.map((j) => [traces[j].rank, traces[j].collectives[next[j]]!] as const));
      for (const j of ready) {
        const other = traces[j].collectives[next[j]]!;
        if (!agree(c, other)) throw new TraceError(traces[j].file, `ranks disagree at ${key}: rank ${t.rank} has ${describe(c)}, rank ${traces[j].rank} ${describe(other)}`);
        take(j, next[j]);
      }
      merged.push({ key, first: byRank.get(minOf(byRank.keys()))!, byRank });
      return true;
    });
    if (progressed) continue;
    const round = readyTransfers(traces, transfers, keys, next, done);
    if (round.length) {
      for (const stage of roundStages(round, traces, traces[0]!.worldSize)) merged.push(p2pStage(stage, traces, merged.length));
      for (const x of round) for (const p of [x.send, x.recv]) if (p) take(p[0], p[1]);
      continue;
    }
    const stuck = traces.findIndex((t, i) => next[i] < t.collectives.length);
    if (stuck < 0) return merged;
    const t = traces[stuck];
    throw new TraceError(t.file, `ranks disagree: rank ${t.rank}'s collective #${next[stuck]} (${describe(t.collectives[next[stuck]]!)}, ${keys[stuck][next[stuck]]}) has no match in the other ranks' traces`);
  }
}

/** A round's sends of one shift and size as one merged entry: each rank's send (else its receive) stands for it. */
function p2pStage(stage: { shift: number; transfers: Transfer[] }, traces: readonly RankTrace[], k: number): MergedCollective {
  const byRank = new Map<number, TraceCollective>();
  for (const x of stage.transfers) {
    for (const p of [x.send, x.recv]) {
      const rank = p && traces[p[0]]!.rank;
      if (p && rank !== undefined && (!byRank.has(rank) || traces[p[0]]!.collectives[p[1]]!.op === "send")) byRank.set(rank, traces[p[0]]!.collectives[p[1]]!);
    }
  }
  return { key: `p2p #${k} shift ${stage.shift}`, first: byRank.get(minOf(byRank.keys()))!, byRank, p2p: { shift: stage.shift, sends: stage.transfers.length } };
}

/** all_to_allv: what i sends j must be what j receives from i, for every pair of ranks read. */
export function checkSplits(m: MergedCollective, traces: readonly RankTrace[]): void {
  const index = new Map(m.first.group.ranks.map((r, k) => [r, k] as const));
  for (const [i, ci] of m.byRank) {
    for (const [j, cj] of m.byRank) {
      const sent = ci.inSplits?.[index.get(j) ?? -1], received = cj.outSplits?.[index.get(i) ?? -1];
      if (sent !== undefined && received !== undefined && sent !== received) {
        const file = traces.find((t) => t.rank === j)!.file;
        throw new TraceError(file, `ranks disagree at ${m.key} (${m.first.name}): rank ${i} sends rank ${j} ${sent} elements, rank ${j} receives ${received} from it`);
      }
    }
  }
}
