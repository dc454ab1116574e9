// Flight-recorder dumps -> the neutral per-rank collectives the job writer reads (DESIGN.md, "Hung jobs"), so
// `runner trace import DUMPS` replays the window the dumps hold: a user tells a network or library fault (the
// replay hangs or errs too) from a hang in their own program (the replay runs clean).
import type { FrDump, FrOp } from "./flight-recorder.js";
import type { Dropped, RankTrace, TraceCollective, TraceGroup } from "./model.js";
import { TraceError } from "./model.js";
import { jobDtype, rankRanges, traceOp } from "./names.js";
import { planGroups } from "./partition.js";

const elements = (shapes: number[][]) => shapes.reduce((n, s) => n + s.reduce((a, b) => a * b, 1), 0);

/** The collectives every member with a dump holds in a group, by sequence; and what each member holds where not all do. */
function sharedWindow(g: TraceGroup, byRank: Map<number, FrDump>): { shared: FrOp[]; partial?: string } {
  const holders = g.ranks.filter((r) => byRank.has(r));
  const held = holders.map((r) => new Map(byRank.get(r)!.ops.filter((o) => !o.p2p && o.group === g.name).map((o) => [o.seq, o])));
  const seqs = [...new Set(held.flatMap((h) => [...h.keys()]))].sort((a, b) => a - b);
  const shared = seqs.filter((s) => held.every((h) => h.has(s)));
  if (shared.length === seqs.length) return { shared: shared.map((s) => held[0]!.get(s)!) };
  const each = holders.map((r, i) => `${r}: ${held[i]!.size ? `#${rankRanges([...held[i]!.keys()].sort((a, b) => a - b))}` : "none"}`);
  return { shared: shared.map((s) => held[0]!.get(s)!), partial: `pg ${g.name}: ${seqs.length - shared.length} collective${seqs.length - shared.length > 1 ? "s" : ""} not held by every member (${each.slice(0, 8).join("; ")}${each.length > 8 ? "; ..." : ""}): not replayed` };
}

function collective(op: FrOp, g: TraceGroup, file: string, dropped: Dropped[]): TraceCollective | undefined {
  const kind = traceOp(op.name);
  const dtype = jobDtype(op.inDtypes[0] ?? op.outDtypes[0] ?? "");
  if (!kind || !dtype) {
    dropped.push({ what: op.name, why: !kind ? "not a collective the job has" : `dtype ${op.inDtypes[0] ?? "unrecorded"} has no job dtype` });
    return undefined;
  }
  let inCount = elements(op.inSizes), outCount = elements(op.outSizes);
  const G = g.ranks.length;
  // An all_to_all's splits are each rank's own and the dump keeps no split sizes: it replays even, cut to whole splits.
  if (kind === "all_to_all") inCount = outCount = Math.floor(Math.min(inCount, outCount) / G) * G;
  if (inCount > 2 ** 40 || outCount > 2 ** 40) throw new TraceError(file, `${op.name} #${op.seq}: a tensor of more than 2^40 elements`);
  return {
    op: kind, name: op.name, dtype, traceDtype: op.inDtypes[0] ?? op.outDtypes[0]!, inCount, outCount, group: g, inPlace: false, async: false, seq: op.seq,
    // The dumps record no root: group rank 0's, which Megatron's broadcasts use.
    ...(kind === "broadcast" || kind === "reduce" || kind === "gather" || kind === "scatter" ? { root: [...g.ranks].sort((a, b) => a - b)[0] } : {}),
  };
}

/**
 * One RankTrace per dump. Each role of process groups (disjoint groups that partition the world alike: the
 * tensor-parallel groups) replays the longest window one of its groups holds whole, on all its groups at once,
 * as SPMD ranks run it; roles one after another, each in sequence order. Sends and recvs are left out (counted).
 */
export function dumpTraces(dumps: FrDump[]): { traces: RankTrace[]; notes: string[] } {
  const byRank = new Map(dumps.map((d) => [d.rank, d]));
  const groups = new Map<string, TraceGroup>();
  for (const d of dumps) for (const [name, g] of d.groups) if (!groups.has(name)) groups.set(name, { name, ranks: g.ranks });
  if (groups.size === 0) throw new TraceError(dumps[0]!.file, "the dumps hold no pg_config: without the process groups' ranks there is no job to write");
  const W = Math.max(...[...groups.values()].flatMap((g) => g.ranks), ...dumps.map((d) => d.rank)) + 1;
  const base = dumps.map((d): RankTrace => ({
    file: d.file, format: "flight-recorder", schema: d.version, rank: d.rank, rankFrom: "the file name", worldSize: W,
    groups: [...d.groups.keys()].map((n) => groups.get(n)!), collectives: [], dropped: [], notes: [],
  }));
  const plan = planGroups(base, W);
  const notes: string[] = [];
  // A role: groups of one family that do not overlap (the tensor-parallel groups; the tensor-and-context ones of
  // the same ranks are another role). Each role replays the longest window one of its groups holds whole.
  const roles: { family: string; groups: TraceGroup[]; g?: TraceGroup; ops: FrOp[] }[] = [];
  const sortedGroups = [...groups.values()].sort((a, b) => a.name.localeCompare(b.name, undefined, { numeric: true }));
  for (const g of sortedGroups) {
    const family = plan.familyOf(g);
    let role = roles.find((x) => x.family === family && x.groups.every((h) => !h.ranks.some((r) => g.ranks.includes(r))));
    if (!role) roles.push((role = { family, groups: [], ops: [] }));
    role.groups.push(g);
    const { shared, partial } = sharedWindow(g, byRank);
    if (partial) notes.push(partial);
    if (shared.length > role.ops.length) Object.assign(role, { g, ops: shared });
  }
  const dropped: Dropped[] = [];
  const traces = base.map((t) => {
    const collectives: TraceCollective[] = [];
    for (const role of roles) {
      // A rank in no group of the role runs it in its family's group that holds it: a stage runs in every part.
      const mine = role.groups.find((g) => g.ranks.includes(t.rank)) ?? sortedGroups.find((g) => plan.familyOf(g) === role.family && g.ranks.includes(t.rank));
      if (!mine) continue;
      for (const op of role.ops) {
        const c = collective(op, mine, t.file, t.rank === dumps[0]!.rank ? dropped : []);
        if (c) collectives.push(c);
      }
    }
    return { ...t, collectives, dropped: t.rank === dumps[0]!.rank ? dropped : [] };
  });
  for (const { g, ops, groups: gs } of roles) if (g && gs.length > 1) notes.push(`pg ${g.name}'s window (#${rankRanges(ops.map((o) => o.seq))}, ${ops.length} collective${ops.length > 1 ? "s" : ""}) replays on each of pg ${gs.map((h) => h.name).join(", ")}`);
  const p2p = dumps.reduce((n, d) => n + d.ops.filter((o) => o.p2p).length, 0);
  if (p2p) notes.push(`${p2p} send/recv entries are not replayed (a job's send_recv shifts every rank alike; a pipeline's pairs do not)`);
  return { traces, notes };
}
