// The one job writer every format shares (DESIGN.md, "Trace import"): merged collectives -> stages, the
// trace's groups -> the job's partitions, async collectives -> streams and `after`, and the `source` block.
import { ELEMENT_BYTES, type DType } from "../config/job.js";
import { formatSize } from "../config/size.js";
import { IN_PLACE_OPS } from "../graph/validate.js";
import { checkSplits, mergeRanks, type MergedCollective } from "./merge.js";
import type { RankTrace, TraceCollective, TraceGroup } from "./model.js";
import { printable, TraceError } from "./model.js";
import { rankRanges, traceElementBytes } from "./names.js";
import { maxOf, minOf, sumOf } from "./limits.js";
import { MAX_COUNT } from "./limits.js";
import { ordered, planGroups, type GroupPlan } from "./partition.js";
import { selectSteps, type StepChoice } from "./steps.js";

export interface ImportOptions {
  /** Replay at this many ranks instead of the trace's (`--world N`). */
  world?: number;
  /** Compute stages holding the gaps between collectives (Kineto timelines). */
  computeGaps?: boolean;
  name?: string;
  /** `--step N` / `--step all`; default: the last step every rank recorded completely. */
  step?: StepChoice;
}

type Json = Record<string, unknown>;

/** Streams for async collectives besides "main" (graph/groups.ts MAX_STREAMS less main). */
const ASYNC_STREAMS = ["async1", "async2", "async3"];

export interface Imported {
  job: Json;
  traces: RankTrace[];
  /** Lines for stdout: what was found and what the job holds. */
  summary: string[];
}

/** The world every trace agrees on, and the ranks read; refuses two files of one rank or mixed formats. */
function world(traces: RankTrace[]): number {
  const [first] = traces;
  for (const t of traces) {
    if (t.format !== first.format) throw new TraceError(t.file, `a ${t.format} trace among ${first.format} ones (${first.file}): import one format at a time`);
    const twin = traces.find((u) => u !== t && u.rank === t.rank);
    if (twin) throw new TraceError(t.file, `rank ${t.rank} (from ${t.rankFrom}) again: ${twin.file} is rank ${twin.rank} too`);
  }
  const sizes = new Set(traces.map((t) => t.worldSize));
  if (sizes.size > 1) {
    const other = traces.find((t) => t.worldSize !== first.worldSize)!;
    throw new TraceError(other.file, `ranks disagree on the world size: ${other.worldSize} here, ${first.worldSize} in ${first.file}`);
  }
  return first.worldSize;
}

/** Uneven splits: what each rank sends depends on the rank, so its trace is needed. */
function rankDependent(c: TraceCollective): boolean {
  return c.op === "all_to_allv" && [...(c.inSplits ?? []), ...(c.outSplits ?? [])].some((x, _, all) => x !== all[0]);
}

/** Where traces are missing: the collectives need every rank's, or one rank's stands for the rest. */
function coverage(traces: RankTrace[], merged: MergedCollective[], W: number, notes: string[]): void {
  const read = new Set(traces.map((t) => t.rank));
  const missing = Array.from({ length: W }, (_, r) => r).filter((r) => !read.has(r));
  if (missing.length === 0) return;
  const needy = merged.find((m) => rankDependent(m.first) && m.first.group.ranks.some((r) => !read.has(r)));
  if (needy) {
    const absent = needy.first.group.ranks.filter((r) => !read.has(r));
    throw new TraceError(traces[0].file, `${needy.first.name} (${needy.key}) has rank-dependent splits, so it needs every rank's trace: missing rank${absent.length > 1 ? "s" : ""} ${rankRanges(absent)}`);
  }
  const who = traces.length === 1 ? `rank ${traces[0].rank}'s trace` : `the traces of ranks ${[...read].join(", ")}`;
  notes.push(`${who} stand${traces.length === 1 ? "s" : ""} for all ${W} ranks: every rank does the same (no rank-dependent splits), missing rank${missing.length > 1 ? "s" : ""} ${rankRanges(missing)}`);
}

/** Elements a job tensor needs for `n` trace elements of `c`'s dtype (1-byte dtypes ride in float16 pairs). */
function elements(c: TraceCollective, n: number): number {
  return traceElementBytes(c.traceDtype) === 1 ? Math.ceil(n / 2) : n;
}

interface Builder {
  /** The collective being written, for a message about its sizes. */
  at?: { file: string; what: string };
  W: number;
  tensors: Map<string, { dtype: DType; count: number }>;
  parts: GroupPlan;
  notes: Set<string>;
  /** Every rank's trace was read (else one rank's stands for the others'). */
  covered: boolean;
}

function tensor(b: Builder, dtype: DType, count: number): string {
  if (!Number.isSafeInteger(count) || count < 0 || count > MAX_COUNT) {
    throw new TraceError(b.at?.file ?? "trace import", `${b.at?.what ?? "a collective"}: a tensor of ${count} elements, outside the job's range of 0 to 2^40`);
  }
  const name = `${dtype}_${count}`;
  b.tensors.set(name, { dtype, count });
  return name;
}

/** The all_to_allv counts matrix of a group: each rank's own splits, or even ones where its trace is absent. */
function countsMatrix(m: MergedCollective, ranks: readonly number[]): number[][] {
  const G = ranks.length;
  return ranks.map((r) => {
    const c = m.byRank.get(r) ?? m.first;
    const splits = c.inSplits?.length === G ? c.inSplits : Array.from({ length: G }, () => Math.floor(c.inCount / G));
    return splits.map((n) => elements(c, n));
  });
}

/** The stage's op-specific fields: tensor, root, counts. */
function opFields(m: MergedCollective, b: Builder, G: number, local: (r: number) => number, partition?: number[][]): Json {
  // An export's own tensor counts where it carried them (the trace's sizes may be a block of them: all_to_allv).
  const c = m.first, exact = c.stage?.tensorCounts, t = (n: number, i = 0) => tensor(b, c.dtype, exact?.[i] ?? elements(c, n));
  const pieces = c.pieces ?? (exact && exact.length > 1 ? exact : undefined);
  switch (c.op) {
    case "allreduce": case "all_gather": case "all_to_all":
      return { op: c.op, input: t(c.inCount) };
    case "broadcast": case "reduce":
      return { op: c.op, input: t(c.inCount), root: local(c.root!) };
    case "gather":
      return { op: "gather", input: t(c.inCount), root: local(c.root!) };
    case "scatter":
      return { op: "scatter", input: t(Math.max(c.inCount, c.outCount * G)), root: local(c.root!) };
    case "reduce_scatter":
      if (pieces && pieces.length > 1) return { op: "reduce_scatter", inputs: pieces.map(t), coalesced: true };
      return { op: "reduce_scatter", input: t(Math.max(c.inCount, c.outCount * G)) };
    case "all_to_allv": {
      if (!rankDependent(c) && c.stage?.op !== "all_to_allv") return { op: "all_to_all", input: t(c.inCount) };
      if (G > 4096) throw new TraceError(b.at?.file ?? "trace import", `${b.at?.what}: an all_to_allv with uneven splits over ${G} ranks (a ${G}x${G} counts matrix); the importer writes those up to 4096 ranks`);
      // One matrix per group of the partition, each from its own ranks' splits; one where they all agree.
      const matrices = (partition ?? [m.first.group.ranks]).map((g) => countsMatrix(m, g));
      const same = matrices.every((x) => JSON.stringify(x) === JSON.stringify(matrices[0]));
      return { op: "all_to_allv", input: tensor(b, c.dtype, exact?.[0] ?? maxOf(matrices.flat().map(sumOf))), counts: same ? matrices[0] : matrices };
    }
    case "barrier":
      return { op: "barrier" };
    case "compute":
      return { op: "compute", us: c.durUs ?? 0 };
    case "send": case "recv": {
      const { shift, sends } = m.p2p!;
      b.notes.add("sends and receives replay in rounds as send_recv ring shifts (every rank sends to rank + shift and receives from rank - shift)");
      if (sends < b.W && b.covered) b.notes.add("a round where fewer ranks send than the world holds still sends from every rank (send_recv has no subset): more bytes move than the trace's");
      return { op: "send_recv", input: t(Math.max(c.inCount, c.outCount)), shift };
    }
  }
}

interface Pending {
  id: string;
  stream: string;
  /** Index in the first rank's list of the first collective after the wait. */
  before: number;
  rank: number;
}

/** Streams for async collectives, and `after` on the first stage after each one's wait. */
class Overlap {
  private pending: Pending[] = [];
  /** Each collective's index in its rank's list. */
  private readonly index = new Map<TraceCollective, number>();

  constructor(traces: RankTrace[], private readonly notes: Set<string>) {
    for (const t of traces) t.collectives.forEach((c, i) => this.index.set(c, i));
  }

  /** The ids this collective must wait for (their waits came before it on their rank), freeing their streams. */
  due(m: MergedCollective): string[] {
    const isDue = (p: Pending) => {
      const c = m.byRank.get(p.rank);
      return c !== undefined && this.index.get(c)! >= p.before;
    };
    const done = this.pending.filter(isDue);
    this.pending = this.pending.filter((p) => !isDue(p));
    return done.map((p) => p.id);
  }

  /** A free stream for an async collective; undefined (in order on "main") when it is not async or all are busy. */
  stream(id: string, m: MergedCollective): string | undefined {
    const [rank, c] = [...m.byRank].find(([, x]) => x.async) ?? [];
    if (c === undefined || rank === undefined) return undefined;
    const free = ASYNC_STREAMS.find((s) => !this.pending.some((p) => p.stream === s));
    if (!free) {
      this.notes.add(`more than ${ASYNC_STREAMS.length} async collectives in flight at once: the others ran in order on "main"`);
      return undefined;
    }
    this.pending.push({ id, stream: free, before: c.waitedBefore!, rank });
    return free;
  }
}

/** What an export carried for the job's stage: its op where Chakra's type is a family (igather), the reduce op, the op's options. */
function exportedFields(c: TraceCollective, op: string): Json {
  const s = c.stage;
  if (!s) return {};
  return { ...(s.op && VARIANTS[op]?.includes(s.op) ? { op: s.op } : {}), ...(s.reduce ? { reduce: s.reduce } : {}), ...s.options };
}

/** Job ops Chakra writes as another's collective type: the export names which one it was. */
const VARIANTS: Record<string, string[]> = { gather: ["igather"], allreduce: ["quantized_allreduce", "compressed_allreduce"] };

/** An exported stage's `after`: the stages of the collectives its data dependencies name, in its rank's list. */
function exportedAfter(m: MergedCollective, traces: RankTrace[], stageOf: Map<TraceCollective, string>): string[] {
  const list = m.first.stage?.after;
  if (!list?.length) return [];
  const rank = [...m.byRank].find(([, c]) => c === m.first)![0];
  const own = traces.find((t) => t.rank === rank)!.collectives;
  return [...new Set(list.flatMap((i) => stageOf.get(own[i]!) ?? []))];
}

const round = (us: number) => Math.round(us * 10) / 10;

/** The trace's own time for a collective: the slowest rank's kernel, as the replay's time is. */
function traceUs(m: MergedCollective): number | undefined {
  const durs = [...m.byRank.values()].map((c) => c.durUs).filter((d): d is number => d !== undefined);
  return durs.length ? round(maxOf(durs)) : undefined;
}

/** The first rank's idle time on the communication timeline before this collective (for --compute gaps). */
function gapBefore(prev: MergedCollective | undefined, m: MergedCollective): number {
  const rank = minOf(m.byRank.keys());
  const a = prev?.byRank.get(rank), c = m.byRank.get(rank);
  if (!a || !c || a.tsUs === undefined || a.durUs === undefined || c.tsUs === undefined) return 0;
  return round(Math.max(0, c.tsUs - (a.tsUs + a.durUs)));
}

/** `--world N`: the first collective that cannot be replayed at N ranks, and why; undefined when all can. */
function rescaleProblem(merged: MergedCollective[], W: number, N: number): string | undefined {
  for (const m of merged) {
    const c = m.first;
    if (c.group.ranks.length !== W) return `${c.name} (${m.key}) runs on process group "${c.group.name}" of ${c.group.ranks.length} of ${W} ranks`;
    if (rankDependent(c)) return `${c.name} (${m.key}) has rank-dependent splits`;
    if (c.op === "send" || c.op === "recv") return `${c.name} (${m.key}) names its peer by rank`;
    if (c.root !== undefined && c.root >= N) return `${c.name} (${m.key}) has root ${c.root}, outside ${N} ranks`;
  }
  return undefined;
}

const fileOf = (traces: RankTrace[], m: MergedCollective) => traces.find((t) => m.byRank.has(t.rank))!.file;

/** Reads nothing: traces in, a job and its summary out. */
export function buildJob(traces: RankTrace[], files: string[], options: ImportOptions = {}): Imported {
  traces = [...traces].sort((a, b) => a.rank - b.rank);
  const traceW = world(traces);
  const steps = selectSteps(traces, options.step);
  traces = steps.traces;
  if (options.computeGaps && traces[0].format !== "kineto") {
    throw new TraceError(traces[0].file, "--compute gaps needs a Kineto trace's timeline (its kernels' ts and dur); a PyTorch Execution Trace records none");
  }
  const groupPlan = planGroups(traces, traceW);
  const merged = mergeRanks(traces, groupPlan);
  for (const m of merged) if (m.first.op === "all_to_allv") checkSplits(m, traces);
  const notes: string[] = [];
  coverage(traces, merged, traceW, notes);
  let W = traceW;
  if (options.world !== undefined && options.world !== traceW) {
    const problem = rescaleProblem(merged, traceW, options.world);
    if (problem) throw new TraceError(files[0], `cannot replay at --world ${options.world}: ${problem}`);
    W = options.world;
    notes.push(`rescaled from the trace's ${traceW} ranks to ${W}: every collective is on the whole world, each rank's message sizes kept`);
    const whole = Array.from({ length: W }, (_, r) => r);
    for (const m of merged) m.first = { ...m.first, group: { name: m.first.group.name, ranks: whole } };
  }
  const b: Builder = { W, tensors: new Map(), parts: groupPlan, notes: new Set(), covered: traces.length === W };
  const overlap = new Overlap(traces, b.notes);
  const stages: Json[] = [], stageOps: string[] = [], traceTimes: Record<string, number> = {};
  const stageOf = new Map<TraceCollective, string>();
  let prev: MergedCollective | undefined;
  merged.forEach((m, k) => {
    const gap = options.computeGaps ? gapBefore(prev, m) : 0;
    if (gap > 0) stages.push({ id: `gap-${k}`, op: "compute", us: gap });
    prev = m;
    // Rescaled, every collective is on the whole world; send_recv shifts over it.
    const group = W !== traceW || m.first.op === "send" || m.first.op === "recv" ? undefined : b.parts.jobGroup(m.first.group, fileOf(traces, m));
    const G = group ? m.first.group.ranks.length : W;
    b.at = { file: fileOf(traces, m), what: `${m.first.name} (${m.key})` };
    const index = ordered(m.first.group.ranks).index;
    const neutral = opFields(m, b, G, (r) => (group ? index.get(r)! : r), group ? b.parts.groups.get(group) : undefined);
    const fields = { ...neutral, ...exportedFields(m.first, String(neutral.op)) };
    stageOps.push(String(fields.op));
    const id = `${String(fields.op).replace(/_/g, "")}-${k}`;
    for (const c of m.byRank.values()) stageOf.set(c, id);
    const after = [...overlap.due(m), ...exportedAfter(m, traces, stageOf)];
    const stream = m.first.stage?.stream ?? overlap.stream(id, m);
    const inPlace = m.first.inPlace && IN_PLACE_OPS.has(fields.op as never) && !("inputs" in fields) && (fields.op !== "all_to_all" || m.first.inCount % G === 0);
    stages.push({ id, ...fields, ...(group ? { group } : {}), ...(stream ? { stream } : {}), ...(after.length ? { after } : {}), ...(inPlace ? { inPlace } : {}) });
    const us = traceUs(m);
    if (us !== undefined) traceTimes[id] = us;
  });
  const oneByte = [...new Set(merged.filter((m) => m.first.op !== "barrier" && m.first.op !== "compute").map((m) => m.first.traceDtype).filter((d) => traceElementBytes(d) === 1))];
  if (oneByte.length) notes.push(`${oneByte.join(", ")} tensors replay as float16 with half as many elements (the job has no 1-byte dtype): the bytes moved are the trace's, odd counts rounded up by one byte`);
  notes.push(...b.parts.notes, ...b.notes, ...new Set(traces.flatMap((t) => t.notes)));
  const dropped = countDropped(traces);
  const source = {
    files, format: traces[0].format, schema: traces[0].schema, worldSize: traceW, ranks: traces.map((t) => t.rank), steps: steps.line.replace(/^steps?: /, ""),
    ...(Object.keys(traceTimes).length ? { trace_us: traceTimes } : {}), dropped, notes,
  };
  const job: Json = {
    name: options.name ?? "trace",
    iterations: 5,
    warmup: 1,
    worldSize: W,
    source,
    tensors: Object.fromEntries([...b.tensors].sort(([x], [y]) => x.localeCompare(y)).map(([n, s]) => [n, { dtype: s.dtype, count: s.count }])),
    ...(b.parts.groups.size ? { groups: Object.fromEntries([...b.parts.groups].map(([n, ranks]) => [n, { ranks }])) } : {}),
    ...(stages.some((s) => s.stream) ? { streams: [...new Set(stages.flatMap((s) => (typeof s.stream === "string" ? [s.stream] : [])))] } : {}),
    stages,
  };
  const summary = summarize(job, merged, stageOps, traces, source, (g) => (W === traceW ? groupPlan.jobGroup(g, files[0] ?? "") : undefined));
  summary.splice(traces.length + 1, 0, steps.line);
  return { job, traces, summary: summary.map((l) => printable(l, 4000)) };
}

function countDropped(traces: RankTrace[]): { what: string; count: number; why: string }[] {
  const counts = new Map<string, { what: string; count: number; why: string }>();
  for (const t of traces) {
    for (const d of t.dropped) {
      const key = `${d.what}\n${d.why}`;
      counts.set(key, { what: d.what, count: (counts.get(key)?.count ?? 0) + 1, why: d.why });
    }
  }
  return [...counts.values()];
}

/** A collective's input and output on one rank, in bytes, as the trace gives them. */
function bytesOf(c: TraceCollective): { input: number; output: number } {
  const size = traceElementBytes(c.traceDtype) ?? ELEMENT_BYTES[c.dtype];
  const p2p = c.op === "send" || c.op === "recv";
  return { input: (p2p ? Math.max(c.inCount, c.outCount) : c.inCount) * size, output: (p2p ? Math.max(c.inCount, c.outCount) : c.outCount) * size };
}

/** Rows of the summary's table: stages alike (op and sizes) counted once, at most this many rows. */
const MAX_ROWS = 40;

const FORMAT_NAMES: Record<RankTrace["format"], string> = {
  "pytorch-et": "PyTorch Execution Trace", kineto: "Kineto trace", chakra: "Chakra trace", "flight-recorder": "flight-recorder dump",
};

function summarize(
  job: Json, merged: MergedCollective[], ops: string[], traces: RankTrace[], source: { worldSize: number; dropped: { what: string; count: number; why: string }[]; notes: string[] },
  jobGroup: (g: TraceGroup) => string | undefined,
): string[] {
  const lines = traces.map((t) => `${t.file}: ${FORMAT_NAMES[t.format]}, schema ${t.schema}, rank ${t.rank} (from ${t.rankFrom}) of ${t.worldSize}, ${t.collectives.length} collectives`);
  lines.push(`ranks found: ${traces.map((t) => t.rank).join(", ")} of ${source.worldSize}${job.worldSize !== source.worldSize ? `; the job runs at ${String(job.worldSize)}` : ""}`);
  // The job's op names, the one spelling every summary uses; the sizes as the trace gives them.
  const rows = new Map<string, { op: string; n: number; input: number; output: number }>();
  merged.forEach((m, k) => {
    const { input, output } = bytesOf(m.first);
    const key = `${ops[k]}\n${input}\n${output}`;
    rows.set(key, { op: ops[k]!, input, output, n: (rows.get(key)?.n ?? 0) + 1 });
  });
  lines.push(`collectives: ${merged.length} (each rank's input and output per stage; stages alike counted once)`);
  for (const e of [...rows.values()].slice(0, MAX_ROWS)) {
    lines.push(`  ${e.op.padEnd(16)} ${String(e.n).padStart(5)} ×  in ${formatSize(e.input).padStart(10)}  out ${formatSize(e.output).padStart(10)}`);
  }
  if (rows.size > MAX_ROWS) lines.push(`  ... and ${rows.size - MAX_ROWS} more`);
  const groups = new Map(merged.flatMap((m) => [...m.byRank.values()].map((c) => [c.group.name, c.group] as const)));
  const listed = (r: number[]) => (r.length > 8 ? `${r.length} ranks: ${rankRanges(r.slice(0, 8))}, ...` : r.join(", "));
  const shown = (g: TraceGroup) => {
    const job = jobGroup(g);
    return `"${g.name}" [${listed(g.ranks)}]${job ? ` -> job group ${JSON.stringify(job)}` : g.ranks.length === source.worldSize ? " (the world)" : ""}`;
  };
  lines.push(`groups: ${[...groups.values()].map(shown).join("; ")}`);
  const streams = (job.stages as Json[]).filter((s) => s.stream).length;
  if (streams) lines.push(`async: ${streams} collective${streams > 1 ? "s" : ""} on a stream of its own until its wait`);
  lines.push(source.dropped.length ? `dropped: ${source.dropped.map((d) => `${d.count} × ${d.what} (${d.why})`).join("; ")}` : "dropped: nothing");
  for (const n of source.notes) lines.push(`note: ${n}`);
  return lines;
}

