// PyTorch Execution Trace (ExecutionTraceObserver, the Chakra host trace), schema 1.0.1 to 1.1.x: the
// collectives are the `record_param_comms` nodes, the groups the `## process_group:init ##` node.
//
// A record_param_comms node's positional inputs are RECORD_PARAM_COMMS's arguments: [tensors,] seq, process
// group (a backend id before 1.0.3, a (name, description) pair since), rank (the root of a rooted op, the
// peer of a p2p op, else the caller's own group rank), collective name, in splits, out splits, [global rank
// start, stride,] group size. Waits and barriers have no tensors. Since 1.1 the node also carries the sizes as
// named attrs (collective_name, dtype, in_msg_nelems, ...), which win where present.
import type { Dropped, RankTrace, TraceCollective, TraceGroup, TraceOp } from "./model.js";
import { TraceError } from "./model.js";
import { jobDtype, NOT_REPLAYED, ranksFromStride, traceOp } from "./names.js";
import { finishRank, type RankHint } from "./rank.js";

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
}

/** 1.0.1 keeps inputs/input_types on the node; later schemas nest values, shapes and types. */
function values(node: Record<string, unknown>, key: "inputs" | "outputs"): Values {
  const nested = node[key];
  if (nested && !Array.isArray(nested) && typeof nested === "object") {
    const v = nested as { values?: unknown[]; types?: string[] };
    return { values: v.values ?? [], types: v.types ?? [] };
  }
  const types = node[key === "inputs" ? "input_types" : "output_types"];
  return { values: Array.isArray(nested) ? nested : [], types: Array.isArray(types) ? (types as string[]) : [] };
}

function readNode(raw: Record<string, unknown>): EtNode {
  const attrs = new Map<string, unknown>();
  if (Array.isArray(raw.attrs)) for (const a of raw.attrs as { name: string; value: unknown }[]) attrs.set(a.name, a.value);
  return { id: Number(raw.id), name: String(raw.name), inputs: values(raw, "inputs"), outputs: values(raw, "outputs"), attrs };
}

/** An ET tensor value: [tensor id, storage id, offset, elements, element bytes, device]. */
type EtTensor = [number, number, number, number, number, string];

function isTensor(v: unknown): v is EtTensor {
  return Array.isArray(v) && v.length === 6 && typeof v[3] === "number" && typeof v[5] === "string";
}

/** Every tensor in a value, however deeply listed (GenericList[GenericList[Tensor]] for all_gather's outputs). */
function tensorsIn(v: unknown): EtTensor[] {
  if (isTensor(v)) return [v];
  return Array.isArray(v) ? v.flatMap(tensorsIn) : [];
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

function positional(node: EtNode, file: string): Positional {
  const { values: v, types } = node.inputs;
  const k = types.findIndex((t) => t === "String");
  if (k < 3 || typeof v[k] !== "string") throw new TraceError(file, `node ${node.id} (record_param_comms): no collective name among its inputs`);
  const ints = v.slice(k + 3).filter((x): x is number => typeof x === "number");
  const splits = (x: unknown) => (Array.isArray(x) ? x.map(Number) : []);
  return {
    tensors: k >= 4 ? tensorsIn(v[0]) : [],
    tensorType: k >= 4 ? types[0] : undefined,
    seq: typeof v[k - 3] === "number" ? (v[k - 3] as number) : undefined,
    pg: v[k - 2],
    rank: typeof v[k - 1] === "number" ? (v[k - 1] as number) : undefined,
    name: v[k] as string,
    inSplits: splits(v[k + 1]),
    outSplits: splits(v[k + 2]),
    groupSize: ints.at(-1),
    rankStart: ints.length >= 3 ? ints[0] : undefined,
    rankStride: ints.length >= 3 ? ints[1] : undefined,
  };
}

/** "[1, 2]" (an attr) or [1, 2] -> numbers. */
function splitList(attr: unknown, fallback: number[]): number[] {
  if (typeof attr !== "string") return fallback;
  const inner = attr.trim().replace(/^\[|\]$/g, "").trim();
  return inner ? inner.split(",").map((x) => Number(x.trim())) : [];
}

interface PgRecord {
  pg_name: string;
  ranks: number[];
  group_size: number;
  backend_id?: number;
  uid?: number;
}

/** The `## process_group:init ##` node's JSON list: names, ranks ([] is all of them) and old backend ids. */
function processGroups(nodes: EtNode[], file: string): { byName: Map<string, TraceGroup>; byBackend: Map<number, string>; worldSize?: number } {
  const byName = new Map<string, TraceGroup>(), byBackend = new Map<number, string>();
  let worldSize: number | undefined;
  const init = nodes.find((n) => n.name === "## process_group:init ##");
  if (!init) return { byName, byBackend };
  let list: PgRecord[];
  try {
    list = JSON.parse(String(init.inputs.values[0])) as PgRecord[];
  } catch {
    throw new TraceError(file, `node ${init.id} (## process_group:init ##): its group list is not JSON (cut short?)`);
  }
  for (const pg of list) {
    const all = pg.ranks.length === 0;
    if (all) worldSize = Math.max(worldSize ?? 0, pg.group_size);
    byName.set(pg.pg_name, { name: pg.pg_name, ranks: all ? Array.from({ length: pg.group_size }, (_, r) => r) : [...pg.ranks] });
    const backend = pg.uid ?? pg.backend_id;
    if (backend !== undefined) byBackend.set(backend, pg.pg_name);
  }
  return { byName, byBackend, worldSize };
}

/** The element count, dtype and tensors of one side of the collective. */
function side(tensors: EtTensor[], type: string | undefined) {
  return { count: tensors.reduce((n, t) => n + t[3], 0), type: type?.replace(/GenericList\[/g, "").replace(/\]/g, "").split(",")[0] };
}

export function readExecutionTrace(doc: Record<string, unknown>, file: string, hint: RankHint): RankTrace {
  const schema = String(doc.schema);
  if (!/^1\.(0\.\d+|1\.\d+)(-|$)/.test(schema)) throw new TraceError(file, `unknown Execution Trace schema "${schema}" (this reader knows 1.0.1 to 1.1.x)`);
  if (!Array.isArray(doc.nodes)) throw new TraceError(file, `"nodes" is not a list`);
  const nodes = (doc.nodes as Record<string, unknown>[]).map(readNode).sort((a, b) => a.id - b.id);
  const pgs = processGroups(nodes, file);
  const collectives: TraceCollective[] = [], dropped: Dropped[] = [], waits: { seq: number; at: number }[] = [];
  const ownRanks: number[] = [], devices = new Set<string>();
  for (const node of nodes.filter((n) => n.name === "record_param_comms")) {
    const p = positional(node, file);
    const name = String(node.attrs.get("collective_name") ?? p.name);
    const op = traceOp(name);
    if (name === "wait" && p.seq !== undefined) waits.push({ seq: p.seq, at: collectives.length });
    const read = op ? collective(node, p, name, op, groupOf(node, p, pgs, file)) : { why: NOT_REPLAYED[name] ?? `unknown collective "${name}"` };
    if ("why" in read) {
      dropped.push({ what: name, why: read.why });
      continue;
    }
    collectives.push(read.collective);
    if (read.ownRank !== undefined) ownRanks.push(read.ownRank);
    p.tensors.forEach((t) => devices.add(t[5]));
  }
  markWaited(collectives, waits);
  const cuda = [...new Set([...devices].map((d) => /^cuda:(\d+)$/.exec(d)?.[1]))];
  const rank = ownRanks.length ? { rank: ownRanks[0]!, from: "its collectives' own rank" }
    : cuda.length === 1 && cuda[0] !== undefined ? { rank: Number(cuda[0]), from: `its tensors' device cuda:${cuda[0]}` } : undefined;
  const world = collectives.find((c) => c.group.name === "0")?.group.ranks.length;
  return finishRank({ file, format: "pytorch-et", schema, collectives, dropped, notes: [], groups: [...pgs.byName.values()], worldSize: pgs.worldSize ?? world, rank }, hint);
}

const ROOTED = new Set<TraceOp>(["broadcast", "reduce", "gather", "scatter"]);

/** One record_param_comms node as a collective, and the caller's own rank where the node records it. */
function collective(node: EtNode, p: Positional, name: string, op: TraceOp, group: TraceGroup): { collective: TraceCollective; ownRank?: number } | { why: string } {
  const outTensors = tensorsIn(node.outputs.values[0]);
  const ins = side(p.tensors, p.tensorType), outs = side(outTensors, node.outputs.types[0]);
  const dtypeName = String(node.attrs.get("dtype") ?? ins.type ?? outs.type ?? "");
  const dtype = jobDtype(dtypeName);
  if (!dtype) return { why: `dtype "${dtypeName}" has no job dtype` };
  // The positional rank: a rooted op's root, a p2p op's peer, else the caller's own (all group-local).
  const at = p.rank === undefined ? undefined : group.ranks[p.rank];
  const p2p = op === "send" || op === "recv";
  const [first] = p.tensors, [out] = outTensors;
  return {
    ownRank: ROOTED.has(op) || p2p || op === "barrier" ? undefined : at,
    collective: {
      op, name, dtype, traceDtype: dtypeName,
      inCount: Number(node.attrs.get("in_msg_nelems") ?? ins.count),
      outCount: Number(node.attrs.get("out_msg_nelems") ?? outs.count),
      pieces: p.tensors.length > 1 ? p.tensors.map((t) => t[3]) : undefined,
      inSplits: splitList(node.attrs.get("in_split_size"), p.inSplits),
      outSplits: splitList(node.attrs.get("out_split_size"), p.outSplits),
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
 * the start, stride and size the node records, else the first ranks (the world, for traces without groups).
 */
function groupOf(node: EtNode, p: Positional, pgs: ReturnType<typeof processGroups>, file: string): TraceGroup {
  const named = node.attrs.get("pg_name") ?? (Array.isArray(p.pg) ? p.pg[0] : typeof p.pg === "number" ? pgs.byBackend.get(p.pg) : undefined);
  const name = String(named ?? "0");
  const known = pgs.byName.get(name);
  if (known) return known;
  const start = Number(node.attrs.get("global_rank_start") ?? p.rankStart), stride = Number(node.attrs.get("global_rank_stride") ?? p.rankStride);
  const size = Number(node.attrs.get("pg_size") ?? p.groupSize);
  if (!Number.isInteger(size) || size < 1) throw new TraceError(file, `node ${node.id} (record_param_comms): process group "${name}" is in no group table and records no size`);
  return { name, ranks: Number.isInteger(start) && Number.isInteger(stride) ? ranksFromStride(start, stride, size) : ranksFromStride(0, 1, size) };
}

/** A collective whose sequence number a later wait names ran async: the wait says where it must be done. */
export function markWaited(collectives: TraceCollective[], waits: { seq: number; at: number }[]): void {
  for (const w of waits) {
    const i = collectives.slice(0, w.at).map((x) => x.seq).lastIndexOf(w.seq);
    const c = collectives[i];
    // Waited at once (nothing ran meanwhile), or waited before: it stays in order on the main stream.
    if (i < 0 || i === w.at - 1 || c.waitedBefore !== undefined) continue;
    c.async = true;
    c.waitedBefore = w.at;
  }
}
