// PyTorch Execution Trace (ExecutionTraceObserver, the Chakra host trace), schema 1.0.1 to 1.1.x: the
// collectives are the `record_param_comms` nodes, the groups the `## process_group:init ##` node, the steps
// the `ProfilerStep#N` nodes.
//
// A record_param_comms node's positional inputs are RECORD_PARAM_COMMS's arguments: [tensors,] seq, process
// group (a pointer in 1.0.1, a backend id until 1.0.3, a (name, description) pair since), rank (the root of a
// rooted op, the peer of a p2p op, else the caller's own group rank), collective name, in splits, out splits,
// [global rank start, stride,] group size. Waits and barriers have no tensors. Since 1.1 the node also
// carries the sizes as named attrs (collective_name, dtype, in_msg_nelems, ...), which win where present.
//
// Schema 1.0.1 has no process-group table and records no group size: its process group is a pointer that
// differs from process to process, so it names a group within one file only, and the group is the world of
// the traces given (or --world), checked against the split lists' length (rank.ts).
//
// Steps: DDP's reducer runs the collectives from its own thread, so they are not descendants of the
// ProfilerStep#N node; a step is the span of node ids from its node to the next step's.
import { count, GroupTable, MAX_GROUP_RANKS, MAX_GROUPS, MAX_WORLD, rankOf, sizeOf } from "./limits.js";
import type { Dropped, StepInfo, TraceCollective, TraceGroup, TraceOp } from "./model.js";
import { quoted, TraceError } from "./model.js";
import { jobDtype, notReplayed, ranksFromStride, traceOp } from "./names.js";
import type { RankHint, ReadRank } from "./rank.js";
import type { JsonTrace } from "./read.js";

interface Values {
  values: unknown[];
  types: string[];
}

interface EtNode {
  id: number;
  name: string;
  inputs: Values;
  outputs: Values;
  attrs: Map<string, unknown>;
  /** "node 727 (record_param_comms)", for messages. */
  where: string;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

/** 1.0.1 keeps inputs/input_types on the node; later schemas nest values, shapes and types. */
function values(node: Record<string, unknown>, key: "inputs" | "outputs", file: string, where: string): Values {
  const nested = node[key];
  let v: unknown, types: unknown;
  if (isObject(nested)) {
    v = nested.values ?? [];
    types = nested.types ?? [];
  } else {
    v = nested ?? [];
    types = node[key === "inputs" ? "input_types" : "output_types"] ?? [];
  }
  if (!Array.isArray(v) || !Array.isArray(types) || !types.every((t) => typeof t === "string")) {
    throw new TraceError(file, `${where}: its ${key} are not a list of values with a list of type names`);
  }
  return { values: v, types: types as string[] };
}

function readNode(raw: Record<string, unknown>, file: string): EtNode {
  const name = String(raw.name);
  if (typeof raw.id !== "number" || !Number.isSafeInteger(raw.id) || raw.id < 0) throw new TraceError(file, `a ${quoted(name)} node's id is ${quoted(raw.id)}, expected an integer >= 0`);
  const where = `node ${raw.id} (${quoted(name).slice(1, -1)})`;
  const attrs = new Map<string, unknown>();
  if (raw.attrs !== undefined) {
    if (!Array.isArray(raw.attrs)) throw new TraceError(file, `${where}: "attrs" is not a list`);
    for (const a of raw.attrs) {
      if (!isObject(a) || typeof a.name !== "string") throw new TraceError(file, `${where}: an attr without a name`);
      attrs.set(a.name, a.value);
    }
  }
  return { id: raw.id, name, inputs: values(raw, "inputs", file, where), outputs: values(raw, "outputs", file, where), attrs, where };
}

/** An ET tensor value: [tensor id, storage id, offset, elements, element bytes, device]. */
type EtTensor = [number, number, number, number, number, string];

function isTensor(v: unknown): v is EtTensor {
  return Array.isArray(v) && v.length === 6 && typeof v[3] === "number" && typeof v[5] === "string";
}

/** Every tensor in a value, however deeply listed (GenericList[GenericList[Tensor]]); a loop, not recursion. */
function tensorsIn(v: unknown, file: string, where: string): EtTensor[] {
  const out: EtTensor[] = [];
  const stack: unknown[] = [v];
  while (stack.length) {
    const x = stack.pop();
    if (isTensor(x)) {
      count(x[3], file, where, "a tensor's element count");
      out.push(x);
    } else if (Array.isArray(x)) {
      for (let i = x.length - 1; i >= 0; i--) stack.push(x[i]);
    }
    if (out.length > MAX_WORLD * 16) throw new TraceError(file, `${where}: more than ${MAX_WORLD * 16} tensors`);
  }
  return out;
}

/** The positional arguments, found from the collective name: the first input typed a plain String. */
interface Positional {
  tensors: EtTensor[];
  tensorType?: string;
  seq?: number;
  pg: unknown;
  rank?: number;
  name: string;
  inSplits: number[];
  outSplits: number[];
  groupSize?: number;
  rankStart?: number;
  rankStride?: number;
}

function splitsOf(x: unknown, file: string, where: string, what: string): number[] {
  if (x === undefined || x === null) return [];
  if (!Array.isArray(x)) throw new TraceError(file, `${where}: ${what} is ${quoted(x)}, expected a list of counts`);
  if (x.length > MAX_WORLD) throw new TraceError(file, `${where}: ${what} has ${x.length} entries, more than the cap of ${MAX_WORLD} ranks`);
  return x.map((n) => count(n, file, where, `an entry of ${what}`));
}

function positional(node: EtNode, file: string): Positional {
  const { values: v, types } = node.inputs;
  const k = types.findIndex((t) => t === "String");
  if (k < 3 || typeof v[k] !== "string") throw new TraceError(file, `${node.where}: no collective name among its inputs`);
  const ints = v.slice(k + 3).filter((x): x is number => typeof x === "number");
  const int = (x: unknown) => (typeof x === "number" && Number.isSafeInteger(x) ? x : undefined);
  return {
    tensors: k >= 4 ? tensorsIn(v[0], file, node.where) : [],
    tensorType: k >= 4 ? types[0] : undefined,
    seq: int(v[k - 3]),
    pg: v[k - 2],
    rank: int(v[k - 1]),
    name: v[k] as string,
    inSplits: splitsOf(v[k + 1], file, node.where, "its in splits"),
    outSplits: splitsOf(v[k + 2], file, node.where, "its out splits"),
    groupSize: ints.at(-1),
    rankStart: ints.length >= 3 ? ints[0] : undefined,
    rankStride: ints.length >= 3 ? ints[1] : undefined,
  };
}

/** "[1, 2]" (an attr) or [1, 2] -> counts. */
function splitList(attr: unknown, fallback: number[], file: string, where: string, what: string): number[] {
  if (attr === undefined) return fallback;
  if (Array.isArray(attr)) return splitsOf(attr, file, where, what);
  if (typeof attr !== "string") throw new TraceError(file, `${where}: ${what} is ${quoted(attr)}, expected a list of counts`);
  if (attr.length > 16 * MAX_WORLD) throw new TraceError(file, `${where}: ${what} is longer than the cap of ${MAX_WORLD} ranks`);
  const inner = attr.trim().replace(/^\[|\]$/g, "").trim();
  return inner ? splitsOf(inner.split(","), file, where, what) : [];
}

interface PgTable {
  byName: Map<string, TraceGroup>;
  byBackend: Map<number, string>;
  worldSize?: number;
  /** The trace has a `## process_group:init ##` node. */
  present: boolean;
}

/** The `## process_group:init ##` node's JSON list: names, ranks ([] is all of them) and old backend ids. */
function processGroups(nodes: EtNode[], file: string): PgTable {
  const byName = new Map<string, TraceGroup>(), byBackend = new Map<number, string>();
  let worldSize: number | undefined;
  const init = nodes.find((n) => n.name === "## process_group:init ##");
  if (!init) return { byName, byBackend, present: false };
  const where = init.where;
  let list: unknown;
  try {
    list = JSON.parse(String(init.inputs.values[0]));
  } catch {
    throw new TraceError(file, `${where}: its group list is not JSON (cut short?)`);
  }
  if (!Array.isArray(list)) throw new TraceError(file, `${where}: its group list is not a list`);
  let total = 0;
  for (const pg of list) {
    if (!isObject(pg) || (typeof pg.pg_name !== "string" && typeof pg.pg_name !== "number")) throw new TraceError(file, `${where}: a group without a pg_name`);
    const name = String(pg.pg_name);
    const at = `${where}, group ${quoted(name)}`;
    const size = sizeOf(pg.group_size, file, at, "group_size");
    if (!Array.isArray(pg.ranks)) throw new TraceError(file, `${at}: ranks is ${quoted(pg.ranks)}, expected a list`);
    if (pg.ranks.length > MAX_WORLD) throw new TraceError(file, `${at}: more than ${MAX_WORLD} ranks`);
    if (byName.size >= MAX_GROUPS) throw new TraceError(file, `${where}: more than ${MAX_GROUPS} process groups (the importer's cap)`);
    const ranks = pg.ranks.map((r) => rankOf(r, file, at, "a rank"));
    if (new Set(ranks).size !== ranks.length) throw new TraceError(file, `${at}: a rank is listed twice`);
    const all = ranks.length === 0;
    total += all ? size : ranks.length;
    if (total > MAX_GROUP_RANKS) throw new TraceError(file, `${where}: its process groups hold more than ${MAX_GROUP_RANKS} ranks together (the importer's cap)`);
    if (all) worldSize = Math.max(worldSize ?? 0, size);
    byName.set(name, { name, ranks: all ? Array.from({ length: size }, (_, r) => r) : ranks });
    const backend = pg.uid ?? pg.backend_id;
    if (typeof backend === "number") byBackend.set(backend, name);
  }
  return { byName, byBackend, worldSize, present: true };
}

/** The element count and dtype of one side of the collective. */
function side(tensors: EtTensor[], type: string | undefined) {
  let n = 0;
  for (const t of tensors) n += t[3];
  return { count: n, type: type?.replace(/GenericList\[/g, "").replace(/\]/g, "").split(",")[0] };
}

const STEP = /^ProfilerStep#(\d+)$/;

export function readExecutionTrace(doc: JsonTrace, hint: RankHint): ReadRank {
  const file = doc.file;
  const schema = String(doc.top.schema);
  if (!/^1\.(0\.\d+|1\.\d+)(-|$)/.test(schema)) throw new TraceError(file, `unknown Execution Trace schema ${quoted(schema)} (this reader knows 1.0.1 to 1.1.x)`);
  if (doc.top.nodes !== true) throw new TraceError(file, `"nodes" is not a list`);
  const nodes = doc.nodes.map((raw) => readNode(raw, file)).sort((a, b) => a.id - b.id);
  const pgs = processGroups(nodes, file);
  // Without a group table, the world (filled in once every trace is read) stands for every group named.
  const world: TraceGroup = { name: "0", ranks: [] };
  const splitLengths = new Set<number>();
  const table = new GroupTable(file);
  const pointers = new Set<string>();
  const collectives: TraceCollective[] = [], dropped: Dropped[] = [], waits: { seq: number; at: number }[] = [];
  const ownRanks: number[] = [], devices = new Set<string>();
  const marks: { step: number; id: number }[] = [];
  let step: number | undefined;
  for (const node of nodes) {
    const m = STEP.exec(node.name);
    if (m) {
      step = Number(m[1]);
      if (!Number.isSafeInteger(step)) throw new TraceError(file, `${node.where}: a step number out of range`);
      marks.push({ step, id: node.id });
      continue;
    }
    if (node.name !== "record_param_comms") continue;
    const p = positional(node, file);
    const nameAttr = node.attrs.get("collective_name");
    const name = typeof nameAttr === "string" ? nameAttr : p.name;
    const op = traceOp(name);
    if (name === "wait" && p.seq !== undefined) waits.push({ seq: p.seq, at: collectives.length });
    if (!op) {
      dropped.push({ what: name.slice(0, 80), why: notReplayed(name), step });
      continue;
    }
    const sized = pgs.present || p.groupSize !== undefined || node.attrs.has("pg_size");
    const group = sized ? groupOf(node, p, pgs, file, table) : world;
    if (!sized) {
      pointers.add(String(p.pg));
      for (const s of [p.inSplits, p.outSplits]) if (s.length) splitLengths.add(s.length);
    }
    const read = collective(node, p, name, op, group, group === world, file);
    if ("why" in read) {
      dropped.push({ what: name, why: read.why, step });
      continue;
    }
    read.collective.step = step;
    collectives.push(read.collective);
    if (read.ownRank !== undefined) ownRanks.push(read.ownRank);
    for (const t of p.tensors) devices.add(t[5]);
  }
  markWaited(collectives, waits);
  const cuda = [...new Set([...devices].map((d) => /^cuda:(\d+)$/.exec(d)?.[1]))];
  const rank = ownRanks.length ? { rank: ownRanks[0]!, from: "its collectives' own rank" }
    : cuda.length === 1 && cuda[0] !== undefined ? { rank: Number(cuda[0]), from: `its tensors' device cuda:${cuda[0]}` } : undefined;
  const notes: string[] = [];
  if (pointers.size > 1) notes.push(`its collectives name ${pointers.size} process groups (pointers) and no table says which ranks each holds: all are taken as the world`);
  const steps: StepInfo | undefined = marks.length ? {
    numbers: marks.map((s) => s.step),
    incomplete: [],
    before: collectives.filter((c) => c.step === undefined).length,
  } : undefined;
  return {
    file, format: "pytorch-et", schema, collectives, dropped, notes, steps,
    groups: pgs.present ? [...pgs.byName.values()] : [],
    worldSize: pgs.worldSize ?? collectives.find((c) => c.group.name === "0")?.group.ranks.length,
    rank, fileRank: hint.fileRank,
    ...(collectives.some((c) => c.group === world) ? { defaultWorld: { group: world, splitLengths }, worldSize: undefined } : {}),
  };
}

const ROOTED = new Set<TraceOp>(["broadcast", "reduce", "gather", "scatter"]);

/** One record_param_comms node as a collective, and the caller's own rank where the node records it. */
function collective(node: EtNode, p: Positional, name: string, op: TraceOp, group: TraceGroup, isWorld: boolean, file: string): { collective: TraceCollective; ownRank?: number } | { why: string } {
  const outTensors = tensorsIn(node.outputs.values[0], file, node.where);
  const ins = side(p.tensors, p.tensorType), outs = side(outTensors, node.outputs.types[0]);
  const dtypeName = String(node.attrs.get("dtype") ?? ins.type ?? outs.type ?? "");
  const dtype = jobDtype(dtypeName);
  if (!dtype) return { why: `dtype ${quoted(dtypeName)} has no job dtype` };
  // The positional rank: a rooted op's root, a p2p op's peer, else the caller's own (all group-local).
  if (p.rank !== undefined) rankOf(p.rank, file, node.where, "its rank");
  const at = p.rank === undefined ? undefined : isWorld ? p.rank : group.ranks[p.rank];
  if (p.rank !== undefined && at === undefined) throw new TraceError(file, `${node.where}: rank ${p.rank} is outside its process group ${quoted(group.name)} of ${group.ranks.length} ranks`);
  const p2p = op === "send" || op === "recv";
  const [first] = p.tensors, [out] = outTensors;
  const where = node.where;
  return {
    ownRank: ROOTED.has(op) || p2p || op === "barrier" ? undefined : at,
    collective: {
      op, name, dtype, traceDtype: dtypeName,
      inCount: count(node.attrs.get("in_msg_nelems") ?? ins.count, file, where, "its in count"),
      outCount: count(node.attrs.get("out_msg_nelems") ?? outs.count, file, where, "its out count"),
      pieces: p.tensors.length > 1 ? p.tensors.map((t) => t[3]) : undefined,
      inSplits: splitList(node.attrs.get("in_split_size"), p.inSplits, file, where, "its in splits"),
      outSplits: splitList(node.attrs.get("out_split_size"), p.outSplits, file, where, "its out splits"),
      group,
      root: ROOTED.has(op) ? at : undefined,
      peer: p2p ? at : undefined,
      inPlace: first !== undefined && out !== undefined && first[0] === out[0] && first[1] === out[1],
      seq: p.seq,
      async: false,
    },
  };
}

/**
 * The node's process group: by name (1.0.3 on) or backend id (before) in the trace's group table, else from
 * the start, stride and size the node records, else the first ranks.
 */
function groupOf(node: EtNode, p: Positional, pgs: PgTable, file: string, table: GroupTable): TraceGroup {
  const named = node.attrs.get("pg_name") ?? (Array.isArray(p.pg) ? p.pg[0] : typeof p.pg === "number" ? pgs.byBackend.get(p.pg) : undefined);
  const name = String(named ?? "0");
  const known = pgs.byName.get(name);
  if (known) return known;
  const sizeValue = node.attrs.get("pg_size") ?? p.groupSize;
  if (sizeValue === undefined) throw new TraceError(file, `${node.where}: process group ${quoted(name)} is in no group table and records no size`);
  const size = sizeOf(sizeValue, file, node.where, `process group ${quoted(name)}'s size`);
  const startValue = node.attrs.get("global_rank_start") ?? p.rankStart, strideValue = node.attrs.get("global_rank_stride") ?? p.rankStride;
  return table.get(JSON.stringify([name, size, startValue, strideValue]), () => {
    if (startValue === undefined || strideValue === undefined) return { name, ranks: ranksFromStride(0, 1, size) };
    const start = rankOf(startValue, file, node.where, "global_rank_start"), stride = sizeOf(strideValue, file, node.where, "global_rank_stride");
    if (start + stride * (size - 1) >= MAX_WORLD) throw new TraceError(file, `${node.where}: process group ${quoted(name)} reaches past rank ${MAX_WORLD - 1}`);
    return { name, ranks: ranksFromStride(start, stride, size) };
  });
}

/**
 * A collective whose sequence number a later wait names ran async: the wait says where it must be done.
 * `waits` come in the order of their `at`; one pass, with the latest collective of each sequence number.
 */
export function markWaited(collectives: TraceCollective[], waits: { seq: number; at: number }[]): void {
  const latest = new Map<number, number>();
  let next = 0;
  for (const w of waits) {
    for (; next < w.at && next < collectives.length; next++) {
      const s = collectives[next]!.seq;
      if (s !== undefined) latest.set(s, next);
    }
    const i = latest.get(w.seq);
    const c = i === undefined ? undefined : collectives[i];
    // Waited at once (nothing ran meanwhile), or waited before: it stays in order on the main stream.
    if (i === undefined || c === undefined || i === w.at - 1 || c.waitedBefore !== undefined) continue;
    c.async = true;
    c.waitedBefore = w.at;
  }
}
