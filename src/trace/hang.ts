// `runner trace hang`: which ranks stopped a hung job, from its flight records (DESIGN.md, "Hung jobs").
// Entries are matched across ranks per process group: collectives by collective sequence, as fr_trace does;
// sends and receives in order between the same two ranks (their p2p sequence counts every send/recv a rank
// makes in the group, so the two ends of a pipeline count differently; fr_trace leaves it out too). Then the wait-for graph: a rank waits on a member of a pending
// op's group that has not reached that op, or that has reached it but has older work pending (its stream is
// busy). The stopped ranks are the ones waited on that wait on nobody: every pending op of theirs was reached
// by all its members. A rank named is one the records show was waited on and had no one to wait for.
import type { FrDump, FrGroup, FrOp } from "./flight-recorder.js";

/** Where a member stands with an op someone else has pending. */
type Standing = "pending" | "passed" | "absent" | "unknown";

export interface Mismatch {
  group: string;
  seq: number;
  kind: "type" | "size" | "dtype" | "state";
  detail: string;
}

export interface StalledGroup {
  group: string;
  desc: string;
  ranks: number[];
  /** The first op some member has pending, and who reached it. */
  op: string;
  seq: number;
  p2p: boolean;
  arrived: number[];
  absent: number[];
  /** Members whose standing the records cannot tell (no dump, or no status for the group). */
  unknown: number[];
  rows: { rank: number; enqueued?: number; completed?: number; pending: number; standing: Standing | "self" }[];
}

export interface Diagnosis {
  stopped: number[];
  why: string[];
  world: number;
  missingDumps: number[];
  stalled: StalledGroup[];
  mismatches: Mismatch[];
  /** Ranks waiting on each other in a ring: a deadlock, not a stopped rank. */
  cycle?: number[];
  notes: string[];
}

/** Every group's members, from all the dumps' pg_config (the runner's records: the world). */
function allGroups(dumps: FrDump[]): Map<string, FrGroup> {
  const groups = new Map<string, FrGroup>();
  for (const d of dumps) for (const [name, g] of d.groups) if (!groups.has(name)) groups.set(name, g);
  const runner = dumps.filter((d) => d.highestRank !== undefined);
  if (runner.length && !groups.has("world")) {
    const world = Math.max(...runner.map((d) => d.highestRank!)) + 1;
    groups.set("world", { desc: "the job's communicator", ranks: Array.from({ length: world }, (_, r) => r) });
  }
  return groups;
}

const pendingOps = (d: FrDump) => d.ops.filter((o) => o.state !== "completed");

/** The members an op needs: its group's, or a send/recv's two ends. */
function members(op: FrOp, groups: Map<string, FrGroup>): number[] {
  return op.p2p ? [op.src!, op.dst!] : groups.get(op.group)?.ranks ?? [];
}

/** Rank `d`'s pending send/recv between the same two ranks of a group, in its order. */
const pairOps = (d: FrDump, op: FrOp) => pendingOps(d).filter((o) => o.p2p && o.group === op.group && o.src === op.src && o.dst === op.dst);

/**
 * The op rank `m` holds for `op` (pending on rank `r`). A collective: the one with its sequence number. A
 * send/recv: p2p sequence numbers count every send/recv a rank makes in the group, so two stages of a pipeline
 * count differently; NCCL pairs a pair's sends and recvs in order, so the i-th pending one on each side match.
 */
function counterpart(m: FrDump, op: FrOp, r: FrDump): FrOp | undefined {
  if (!op.p2p) return m.ops.find((o) => !o.p2p && o.group === op.group && o.seq === op.seq);
  return pairOps(m, op)[pairOps(r, op).indexOf(op)];
}

/**
 * Where rank `m` stands with `op`, pending on rank `r`: it has it pending; it passed it (its record holds it
 * completed, or later work in the group: a dump of active entries drops completed ones); it never reached it
 * (its newest work in the group is older, or pg_status says so); or the records cannot tell.
 */
function standing(m: FrDump | undefined, op: FrOp, r: FrDump): Standing {
  if (!m) return "unknown";
  const own = counterpart(m, op, r);
  if (own) return own.state === "completed" ? "passed" : "pending";
  if (op.p2p) return pairOps(m, op).length ? "absent" : "unknown";
  const kin = m.ops.filter((o) => !o.p2p && o.group === op.group);
  if (kin.some((o) => o.seq > op.seq)) return "passed";
  if (kin.some((o) => o.seq < op.seq)) return "absent";
  // pg_status counts whichever kind of work came last: it is read only where the group shows no send/recv.
  const s = m.status.get(op.group);
  if (!s || m.ops.some((o) => o.group === op.group && o.p2p) || r.ops.some((o) => o.group === op.group && o.p2p)) return "unknown";
  return s.enqueued >= op.seq ? "passed" : "absent";
}

/** `unknown`: the records cannot tell where `to` stands, so the rank waiting cannot be shown to wait on no one. */
interface Edge { to: number; op: FrOp; why: "absent" | "busy" | "unknown" }

/** Whom rank `d` waits on: members absent from one of its pending ops, or present with older work pending. */
function waitsOn(d: FrDump, byRank: Map<number, FrDump>, groups: Map<string, FrGroup>): Edge[] {
  const edges: Edge[] = [];
  for (const op of pendingOps(d)) {
    for (const r of members(op, groups)) {
      if (r === d.rank) continue;
      const m = byRank.get(r);
      const s = standing(m, op, d);
      if (s === "absent" || s === "unknown") edges.push({ to: r, op, why: s });
      if (s === "pending") {
        const own = counterpart(m!, op, d)!;
        if (m!.ops.some((o) => o.order < own.order && o.state !== "completed" && waitsBeyond(o, m!, byRank, groups))) edges.push({ to: r, op, why: "busy" });
      }
    }
  }
  return edges;
}

/** An older op of `m` that is itself held up: some member has not reached it. */
function waitsBeyond(o: FrOp, m: FrDump, byRank: Map<number, FrDump>, groups: Map<string, FrGroup>): boolean {
  return members(o, groups).some((r) => r !== m.rank && standing(byRank.get(r), o, m) === "absent");
}

/**
 * fr_trace's checks on one op across the members that hold it (types.py, Op.match): type; input sizes except
 * all_to_all and scatter, output sizes except all_to_all and gather; dtypes; state.
 */
const UNEVEN_IN = /^(all_to_all|alltoall|scatter)/, UNEVEN_OUT = /^(all_to_all|alltoall|gather)/;

function mismatches(dumps: FrDump[]): Mismatch[] {
  const seen = new Map<string, { rank: number; op: FrOp }[]>();
  for (const d of dumps) for (const op of d.ops) {
    if (op.p2p && op.state === "completed") continue;
    const key = op.p2p ? `${op.group}:p2p:${op.src}->${op.dst}:#${pairOps(d, op).indexOf(op)}` : `${op.group}:${op.seq}`;
    seen.set(key, [...(seen.get(key) ?? []), { rank: d.rank, op }]);
  }
  const out: Mismatch[] = [];
  for (const held of seen.values()) {
    const [first] = held;
    const { group, seq } = first!.op;
    const differ = (f: (o: FrOp) => string) => held.find((h) => f(h.op) !== f(first!.op));
    const add = (kind: Mismatch["kind"], f: (o: FrOp) => string) => {
      const other = differ(f);
      if (other) out.push({ group, seq, kind, detail: `rank ${first!.rank}: ${f(first!.op)}, rank ${other.rank}: ${f(other.op)}` });
    };
    const { name, p2p } = first!.op;
    if (p2p) {
      // A send and its recv (fr_trace matches them on ends and sizes, not sequence): what is sent is what is received.
      add("size", (o) => JSON.stringify(o.name === "send" ? o.inSizes : o.outSizes));
      add("dtype", (o) => (o.name === "send" ? o.inDtypes : o.outDtypes).join(","));
      continue;
    }
    add("type", (o) => o.name);
    const sizes = (o: FrOp) => `${UNEVEN_IN.test(name) ? "" : `in ${JSON.stringify(o.inSizes)} `}${UNEVEN_OUT.test(name) ? "" : `out ${JSON.stringify(o.outSizes)}`}`.trim();
    if (!differ((o) => o.name)) add("size", sizes);
    add("dtype", (o) => o.inDtypes.join(","));
    add("state", (o) => o.state);
  }
  return out;
}

/** A ring in the wait-for graph among ranks with no stopped rank at its end. */
function findCycle(edges: Map<number, Edge[]>): number[] | undefined {
  const state = new Map<number, 1 | 2>();
  const stack: number[] = [];
  const visit = (r: number): number[] | undefined => {
    state.set(r, 1);
    stack.push(r);
    for (const e of edges.get(r) ?? []) {
      if (state.get(e.to) === 1) return stack.slice(stack.indexOf(e.to));
      if (!state.has(e.to)) {
        const c = visit(e.to);
        if (c) return c;
      }
    }
    stack.pop();
    state.set(r, 2);
    return undefined;
  };
  for (const r of edges.keys()) if (!state.has(r)) {
    const c = visit(r);
    if (c) return c;
  }
  return undefined;
}

const list = (ranks: number[]) => (ranks.length ? ranks.join(", ") : "none");

function label(g: string, groups: Map<string, FrGroup>): string {
  const desc = groups.get(g)?.desc;
  return desc ? `${desc} (pg ${g})` : `pg ${g}`;
}

/** A stalled group's op it waits at, who reached it and each member's standing. */
function stalledGroup(name: string, dumps: FrDump[], byRank: Map<number, FrDump>, groups: Map<string, FrGroup>): StalledGroup | undefined {
  const held = (p2p: boolean) => dumps.flatMap((d) => pendingOps(d).filter((o) => o.group === name && o.p2p === p2p).map((op) => ({ op, d })));
  const pend = held(false);
  const ordered = (pend.length ? pend : held(true)).sort((a, b) => a.op.seq - b.op.seq);
  // The op the group waits at: the lowest one a member never reached, else the lowest pending one.
  const at = ordered.find((h) => members(h.op, groups).some((r) => r !== h.d.rank && standing(byRank.get(r), h.op, h.d) === "absent")) ?? ordered[0];
  if (!at) return undefined;
  const { op: first, d: holder } = at;
  const g = groups.get(name) ?? { desc: "", ranks: [] };
  const ranks = first.p2p ? [first.src!, first.dst!] : g.ranks;
  const rows = ranks.map((r) => {
    const d = byRank.get(r);
    const mine = d?.ops.filter((o) => o.group === name && o.p2p === first.p2p) ?? [];
    const s = d?.status.get(name);
    return { rank: r, enqueued: s?.enqueued, completed: s?.completed, pending: mine.filter((o) => o.state !== "completed").length, standing: r === holder.rank ? "pending" as const : standing(d, first, holder) };
  });
  const by = (s: Standing) => rows.filter((x) => x.standing === s).map((x) => x.rank);
  return {
    group: name, desc: g.desc, ranks: g.ranks, op: first.name, seq: first.seq, p2p: first.p2p,
    arrived: [...by("pending"), ...by("passed")].sort((a, b) => a - b), absent: by("absent"), unknown: by("unknown"), rows,
  };
}

export function diagnose(dumps: FrDump[]): Diagnosis {
  const groups = allGroups(dumps);
  const byRank = new Map(dumps.map((d) => [d.rank, d]));
  const world = Math.max(...[...groups.values()].flatMap((g) => g.ranks), ...dumps.map((d) => d.rank)) + 1;
  const missingDumps = Array.from({ length: world }, (_, r) => r).filter((r) => !byRank.has(r));
  const edges = new Map(dumps.map((d) => [d.rank, waitsOn(d, byRank, groups)]));
  const waitedOn = new Map<number, Edge[]>(), unknownTo = new Map<number, Edge[]>();
  for (const [from, es] of edges) for (const e of es) {
    const into = e.why === "unknown" ? unknownTo : waitedOn;
    into.set(e.to, [...(into.get(e.to) ?? []), { ...e, to: from }]);
  }
  // Named: ranks waited on that wait on no one, shown by their own record (a rank without a dump cannot be).
  const stopped = [...waitedOn.keys()].filter((r) => byRank.has(r) && (edges.get(r) ?? []).length === 0).sort((a, b) => a - b);
  const why = stopped.map((r) => whyStopped(r, waitedOn.get(r)!, byRank, groups));
  for (const [r, es] of [...unknownTo].filter(([r]) => !byRank.has(r)).sort(([a], [b]) => a - b)) {
    const op = es[0]!.op;
    why.push(`rank ${r}: no dump, and ranks ${[...new Set(es.map((e) => e.to))].sort((a, b) => a - b).join(", ")} wait for it (${label(op.group, groups)} ${op.name} #${op.seq}): the records cannot show whether it stopped`);
  }
  const stalledNames = [...new Set(dumps.flatMap((d) => pendingOps(d).map((o) => o.group)))];
  const stalled = stalledNames.map((n) => stalledGroup(n, dumps, byRank, groups)).filter((s): s is StalledGroup => !!s);
  // The groups that hold a stopped rank first (those it never reached before those it holds up), then the rest.
  const rankOf = (s: StalledGroup) => (s.absent.some((r) => stopped.includes(r)) ? 0 : s.ranks.some((r) => stopped.includes(r)) ? 1 : 2);
  stalled.sort((a, b) => rankOf(a) - rankOf(b) || Number(a.p2p) - Number(b.p2p) || a.group.localeCompare(b.group, undefined, { numeric: true }));
  const notes = [...new Set(dumps.flatMap((d) => d.notes.map((n) => `${d.file}: ${n}`)))];
  const known = new Map([...edges].map(([r, es]) => [r, es.filter((e) => e.why !== "unknown")]));
  const cycle = stopped.length === 0 ? findCycle(known) : undefined;
  return { stopped, why, world, missingDumps, stalled, mismatches: mismatches(dumps), cycle, notes };
}

/** One clause: the op its waiters need it for, who reached it and who did not, and what its own record shows. */
function whyStopped(r: number, waiters: Edge[], byRank: Map<number, FrDump>, groups: Map<string, FrGroup>): string {
  // A collective the rank never reached says more than a send/recv: it names the whole group's wait.
  const absent = waiters.find((w) => w.why === "absent" && !w.op.p2p) ?? waiters.find((w) => w.why === "absent") ?? waiters[0]!;
  const op = absent.op;
  const holder = byRank.get(absent.to)!;
  const reached = members(op, groups).filter((m) => m !== r && (m === holder.rank || ["pending", "passed"].includes(standing(byRank.get(m), op, holder))));
  const own = pendingOps(byRank.get(r)!);
  const self = own.length === 0
    ? "it has no work pending (its host side stopped issuing)"
    : `its ${own.length} pending op${own.length > 1 ? "s were" : " was"} reached by every peer (its device stopped completing them)`;
  const what = op.p2p ? `${op.name} ${op.src}->${op.dst} p2p #${op.seq}` : `${op.name} #${op.seq}`;
  return `rank ${r}: ${label(op.group, groups)} ${what}: ${list(reached)} arrived, ${r} did not; ${self}`;
}

/** The text `trace hang` prints: the verdict first, then one table per stalled group. */
export function hangText(d: Diagnosis): string[] {
  const out = [`stopped ranks: ${d.stopped.length ? d.stopped.join(", ") : "none the records can show"}`];
  out.push(...d.why);
  if (d.stopped.length === 0) {
    out.push(d.cycle ? `ranks ${d.cycle.join(" -> ")} -> ${d.cycle[0]} wait on each other: a deadlock (collectives issued in different orders), no rank stopped`
      : d.stalled.length ? "every stalled op was reached by all its members the records hold: the dumps cannot tell which rank stopped (a network or library fault, or a rank without a dump)" : "no op is pending in any record: nothing hung here");
  }
  if (d.missingDumps.length) out.push(`missing dumps: rank${d.missingDumps.length > 1 ? "s" : ""} ${d.missingDumps.join(", ")} (of a world of ${d.world})`);
  for (const s of d.stalled) {
    out.push("", `${s.desc || "group"} (pg ${s.group}, ranks ${s.ranks.join(",")}): ${s.p2p ? "p2p" : "collective"} #${s.seq} ${s.op}: arrived ${list(s.arrived)}; not arrived ${list(s.absent)}${s.unknown.length ? `; cannot tell ${list(s.unknown)}` : ""}`);
    out.push(`  ${"rank".padStart(5)}  ${"enqueued".padStart(9)}  ${"completed".padStart(9)}  ${"pending".padStart(7)}  at #${s.seq}`);
    for (const r of s.rows) out.push(`  ${String(r.rank).padStart(5)}  ${String(r.enqueued ?? "-").padStart(9)}  ${String(r.completed ?? "-").padStart(9)}  ${String(r.pending).padStart(7)}  ${r.standing === "absent" ? "not arrived" : r.standing === "pending" ? "arrived, pending" : r.standing === "passed" ? "passed" : "cannot tell"}`);
  }
  if (d.mismatches.length) {
    out.push("", `mismatches (${d.mismatches.length}):`);
    for (const m of d.mismatches.slice(0, 20)) out.push(`  pg ${m.group} #${m.seq}: ${m.kind}: ${m.detail}`);
  }
  for (const n of d.notes) out.push(`note: ${n}`);
  return out;
}
