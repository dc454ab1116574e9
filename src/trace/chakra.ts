// Chakra execution traces (mlcommons/chakra, the format ASTRA-sim and PARAM read): a length-delimited
// GlobalMetadata, then length-delimited Nodes (proto/et_def.proto, decoded by protobufjs). The collectives
// are the COMM_COLL_NODEs that carry `comm_type` and `comm_size` (bytes), and COMM_SEND/RECV_NODEs with
// `comm_src`/`comm_dst`; the CPU-side COMM_COLL_NODEs (no comm_type) only launch them. The dtype is the
// node's own tensor type, else that of the CPU node it depends on. Chakra records no world size: it comes
// from --world, or from the metadata `runner trace export` writes (world_size, rank, process_groups). Chakra's
// JSON form is encoded back into the protobuf form and read the same way.
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { DType } from "../config/job.js";
import { ELEMENT_BYTES, reduceOpSchema, stageSchema } from "../config/job.js";
import { lowestFirstOrder } from "../graph/schedule.js";
import { count, MAX_COLLECTIVES, MAX_DEPTH, MAX_VALUE_BYTES, MAX_WORLD, rankOf, sizeOf } from "./limits.js";
import type { Dropped, TraceCollective, TraceGroup, TraceOp } from "./model.js";
import { outputOf, quoted, TraceError } from "./model.js";
import { jobDtype, traceElementBytes } from "./names.js";
import type { ReadRank } from "./rank.js";

// protobufjs types, loaded on first use (the rank path never needs them).
type Protobuf = typeof import("protobufjs");
interface Messages {
  GlobalMetadata: import("protobufjs").Type;
  Node: import("protobufjs").Type;
}
interface Codec extends Messages {
  pb: Protobuf;
  /** The same messages with protobuf JSON's lowerCamelCase field names (Chakra's JSON form). */
  json: Messages;
}

let codec: Codec | undefined;

/** The vendored .proto (schema/chakra, shipped in the package), found from this module: dist/trace or dist/bundle. */
function protoText(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  return readFileSync(path.join(here, "../../schema/chakra/et_def.proto"), "utf8");
}

export async function chakraCodec(): Promise<Codec> {
  if (!codec) {
    const pb = ((await import("protobufjs")) as unknown as { default?: Protobuf }).default ?? ((await import("protobufjs")) as unknown as Protobuf);
    const messages = (keepCase: boolean): Messages => {
      const root = pb.parse(protoText(), { keepCase }).root;
      return { GlobalMetadata: root.lookupType("ChakraProtoMsg.GlobalMetadata"), Node: root.lookupType("ChakraProtoMsg.Node") };
    };
    codec = { pb, ...messages(true), json: messages(false) };
  }
  return codec;
}

/** Node types and collective types, by their numbers in et_def.proto. */
export const NODE = { COMP: 4, SEND: 5, RECV: 6, COLL: 7 } as const;
export const COMM: Record<number, TraceOp> = {
  0: "allreduce", 1: "reduce", 2: "all_gather", 3: "gather", 4: "scatter", 5: "broadcast", 6: "all_to_all", 7: "reduce_scatter", 8: "reduce_scatter", 9: "barrier",
};
const COMM_NAME: Record<number, string> = {
  0: "ALL_REDUCE", 1: "REDUCE", 2: "ALL_GATHER", 3: "GATHER", 4: "SCATTER", 5: "BROADCAST", 6: "ALL_TO_ALL", 7: "REDUCE_SCATTER", 8: "REDUCE_SCATTER_BLOCK", 9: "BARRIER",
};

interface Attr {
  name?: string;
  [k: string]: unknown;
}

/** An attribute's value, whichever oneof field holds it (64-bit ints as numbers where safe). */
function attrValue(a: Attr): unknown {
  for (const [k, v] of Object.entries(a)) {
    if (k === "name" || k === "doc_string" || v === undefined || v === null) continue;
    if (k.endsWith("_list")) return (v as { values?: unknown[] }).values ?? [];
    return v;
  }
  return undefined;
}

function attrs(list: unknown): Map<string, unknown> {
  const m = new Map<string, unknown>();
  if (Array.isArray(list)) for (const a of list as Attr[]) if (typeof a.name === "string") m.set(a.name, attrValue(a));
  return m;
}

/** "['Tensor(float)']" -> "float"; the first tensor type in a Chakra IOInfo types string. */
function tensorType(types: unknown): string | undefined {
  if (typeof types !== "string") return undefined;
  const m = /Tensor\(([^)]{1,40})\)/.exec(types.slice(0, 4096));
  return m?.[1];
}

interface ChakraNode {
  id: number;
  name: string;
  type: number;
  attrs: Map<string, unknown>;
  /** Data and control dependencies alike: both order the nodes. */
  deps: number[];
  dataDeps: number[];
  types?: string;
  dur?: number;
  where: string;
}

/** One Chakra `.et` file's bytes -> its rank's collectives. */
export async function readChakra(bytes: Buffer, file: string, hint: { fileRank?: number; world?: number }): Promise<ReadRank> {
  const { pb, GlobalMetadata, Node } = await chakraCodec();
  const reader = pb.Reader.create(bytes);
  const toObject = { longs: Number, enums: Number, defaults: false, arrays: true, oneofs: false };
  let meta: Record<string, unknown>;
  try {
    meta = GlobalMetadata.toObject(GlobalMetadata.decodeDelimited(reader), toObject);
  } catch (error) {
    throw new TraceError(file, `not a Chakra trace: its first record is no GlobalMetadata (${(error as Error).message})`);
  }
  const metaAttrs = attrs(meta.attr);
  const nodes: ChakraNode[] = [];
  const passThrough = new Map<number, number[]>();
  const cpuTypes = new Map<number, string>();
  let index = 0;
  while (reader.pos < reader.len) {
    let raw: Record<string, unknown>;
    try {
      raw = Node.toObject(Node.decodeDelimited(reader), toObject);
    } catch (error) {
      throw new TraceError(file, `node record ${index} (at byte ${reader.pos}): not a Chakra Node (${(error as Error).message}; cut short?)`);
    }
    index++;
    const type = Number(raw.type ?? 0);
    const id = Number(raw.id ?? 0);
    const name = String(raw.name ?? "");
    const inputs = raw.inputs as { types?: string } | undefined;
    const dataDeps = depList(raw.data_deps), deps = [...dataDeps, ...depList(raw.ctrl_deps)];
    const a = type === NODE.COLL || type === NODE.SEND || type === NODE.RECV || type === NODE.COMP ? attrs(raw.attr) : undefined;
    // Compute is replayed only where an export wrote it as a stage (ASTRA-sim's COMP nodes order, nothing more).
    if (!a || (type === NODE.COLL && !a.has("comm_type")) || (type === NODE.COMP && a.get("stage_op") !== "compute")) {
      // Not a collective (compute, or the CPU-side op that launches one): only passed through to order them.
      passThrough.set(id, deps);
      // A CPU-side op's tensor type names the dtype of the GPU node that depends on it.
      const t = a && type === NODE.COLL ? tensorType(inputs?.types) : undefined;
      if (t) cpuTypes.set(id, t);
      continue;
    }
    if (nodes.length >= MAX_COLLECTIVES) throw new TraceError(file, `more than ${MAX_COLLECTIVES} collectives (the importer's cap)`);
    nodes.push({ id, name, type, attrs: a, deps, dataDeps, types: inputs?.types, dur: raw.duration_micros === undefined ? undefined : Number(raw.duration_micros), where: `node ${id} (${quoted(name.slice(0, 60)).slice(1, -1)})` });
  }
  nodes.sort((a, b) => a.id - b.id);
  const { order, after } = dependencyOrder(nodes, passThrough, file);
  const kept = new Map(nodes.map((n, k) => [n.id, k] as const));
  // The world and groups where `runner trace export` recorded them; else --world (required).
  const recordedWorld = metaAttrs.get("world_size");
  const worldSize = recordedWorld === undefined ? undefined : sizeOf(recordedWorld, file, "GlobalMetadata", "world_size");
  const recordedRank = metaAttrs.get("rank");
  const rank = recordedRank === undefined ? undefined : { rank: rankOf(recordedRank, file, "GlobalMetadata", "rank"), from: "its GlobalMetadata" };
  const world: TraceGroup = { name: "0", ranks: worldSize === undefined ? [] : Array.from({ length: worldSize }, (_, r) => r) };
  const groups = new Map<string, TraceGroup>();
  const listed = metaAttrs.get("process_groups");
  if (typeof listed === "string") {
    let parsed: unknown;
    try {
      parsed = JSON.parse(listed.slice(0, 16 << 20));
    } catch {
      throw new TraceError(file, "GlobalMetadata: process_groups is not JSON");
    }
    if (!Array.isArray(parsed) || parsed.length > 512) throw new TraceError(file, "GlobalMetadata: process_groups is not a list of at most 512 groups");
    for (const g of parsed as { pg_name?: unknown; ranks?: unknown }[]) {
      const name = String(g?.pg_name).slice(0, 200);
      if (!Array.isArray(g?.ranks) || g.ranks.length > MAX_WORLD) throw new TraceError(file, `GlobalMetadata: process group ${quoted(name)} has no list of ranks`);
      groups.set(name, { name, ranks: g.ranks.map((r) => rankOf(r, file, `GlobalMetadata, process group ${quoted(name)}`, "a rank")) });
    }
  }
  const collectives: TraceCollective[] = [], dropped: Dropped[] = [];
  // Each node's place in the list, to name what a send or receive waits for by its index there.
  const at = new Map<number, number>();
  for (const k of order) {
    const c = collective(nodes[k]!, file, cpuTypes, groups, world, dropped);
    if (!c) continue;
    at.set(k, collectives.length);
    if (c.op === "send" || c.op === "recv") c.after = after[k]!.flatMap((d) => at.get(d) ?? []);
    // An exported stage's `after`: its data dependencies (its stream's order is in its control ones).
    if (c.stage) c.stage.after = nodes[k]!.dataDeps.flatMap((id) => at.get(kept.get(id) ?? -1) ?? []);
    collectives.push(c);
  }
  const schema = String(metaAttrs.get("schema") ?? meta.version ?? "unversioned").slice(0, 60);
  return {
    file, format: "chakra", schema, collectives, dropped,
    notes: nodes.some((n) => n.type === NODE.COLL && ROOTED.has(COMM[Number(n.attrs.get("comm_type"))]!) && !n.attrs.has("root")) ? ["Chakra records no roots: rooted collectives replay from their group's first rank"] : [],
    groups: [...groups.values()], worldSize, rank, fileRank: hint.fileRank,
    ...(collectives.some((c) => c.group === world) && worldSize === undefined
      ? {
        defaultWorld: {
          group: world, splitLengths: new Set<number>(), needsWorld: "a Chakra trace records no world size: give it with --world N",
          // Outputs follow from the world (all-gather's is W inputs), known once every trace is read.
          settled: () => {
            for (const c of collectives) if (c.group === world) c.outCount = outputOf(c.op, c.inCount, world.ranks.length);
          },
        },
      }
      : {}),
    empty: nodes.length === 0 ? "it holds no COMM_COLL_NODE with comm_type and comm_size, nor COMM_SEND/RECV_NODE" : undefined,
  };
}

/** Whether a JSON trace's first bytes are Chakra's JSON form: a GlobalMetadata object (version, attr) first. */
export function isChakraJson(head: Buffer): boolean {
  return /^\s*\{\s*("version"|"attr"|\})/.test(head.toString("latin1"));
}

/** The top-level objects of a text holding JSON objects one after another, as slices; depth and size capped. */
function* topLevelObjects(text: string, file: string): Generator<string> {
  let depth = 0, start = -1, inString = false, escaped = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (inString) {
      if (escaped) escaped = false;
      else if (c === "\\") escaped = true;
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"' && depth > 0) inString = true;
    else if (c === "{" || c === "[") {
      if (depth === 0) start = i;
      if (++depth > MAX_DEPTH) throw new TraceError(file, `nested deeper than ${MAX_DEPTH} levels at byte ${i}`);
    } else if (c === "}" || c === "]") {
      if (--depth < 0) throw new TraceError(file, `an unmatched ${quoted(c)} at byte ${i}`);
      if (depth === 0) {
        if (i + 1 - start > MAX_VALUE_BYTES) throw new TraceError(file, `a record of more than ${MAX_VALUE_BYTES} bytes at byte ${start}`);
        yield text.slice(start, i + 1);
      }
    } else if (depth === 0 && !/\s/.test(c)) throw new TraceError(file, `not Chakra JSON: ${quoted(text.slice(i, i + 20))} between records at byte ${i}`);
  }
  if (depth !== 0) throw new TraceError(file, "cut short: its last record is not closed");
}

/**
 * Chakra's JSON form (what chakra_jsonizer writes: the GlobalMetadata, then each Node, as protobuf JSON objects
 * one after another) as the protobuf form readChakra reads: each object is encoded as the message it stands for.
 */
export async function chakraJsonToProtobuf(text: string, file: string): Promise<Buffer> {
  const { pb, json } = await chakraCodec();
  const writer = pb.Writer.create();
  let index = 0;
  for (const record of topLevelObjects(text, file)) {
    const type = index === 0 ? json.GlobalMetadata : json.Node;
    try {
      type.encodeDelimited(type.fromObject(JSON.parse(record) as Record<string, unknown>), writer);
    } catch (error) {
      throw new TraceError(file, `record ${index}: not a Chakra ${type.name} in protobuf JSON (${(error as Error).message.slice(0, 200)})`);
    }
    index++;
  }
  return Buffer.from(writer.finish());
}

/** A node's dependency ids, at most 4096 of them (the file sets the count). */
const depList = (list: unknown): number[] => (Array.isArray(list) ? list.slice(0, 4096).map(Number) : []);

/** Steps of walking dependencies through compute and CPU nodes, over all collectives of one file. */
const MAX_DEP_STEPS = 20_000_000;

/**
 * The collective nodes (sorted by id) in the order of their dependencies, ties by id, and for each one the
 * collective nodes it waits for: its own deps and those it reaches through compute and CPU-side nodes.
 */
function dependencyOrder(nodes: ChakraNode[], passThrough: Map<number, number[]>, file: string): { order: number[]; after: number[][] } {
  const index = new Map(nodes.map((n, k) => [n.id, k] as const));
  let steps = 0;
  const after = nodes.map((n) => {
    const found = new Set<number>(), seen = new Set<number>(), stack = [...n.deps];
    while (stack.length) {
      const d = stack.pop()!;
      if (seen.has(d) || d === n.id) continue;
      seen.add(d);
      if (++steps > MAX_DEP_STEPS) throw new TraceError(file, `${n.where}: more than ${MAX_DEP_STEPS} steps through the dependencies of its collectives (the importer's cap)`);
      const k = index.get(d);
      if (k !== undefined) found.add(k);
      else for (const up of passThrough.get(d) ?? []) stack.push(up);
    }
    return [...found];
  });
  const order = lowestFirstOrder(after);
  if (order.length < nodes.length) {
    const placed = new Set(order);
    throw new TraceError(file, `${nodes.find((_, k) => !placed.has(k))!.where}: its dependencies form a cycle`);
  }
  return { order, after };
}

const ROOTED = new Set<TraceOp>(["broadcast", "reduce", "gather", "scatter"]);


function collective(n: ChakraNode, file: string, cpuTypes: Map<number, string>, groups: Map<string, TraceGroup>, world: TraceGroup, dropped: Dropped[]): TraceCollective | undefined {
  const a = n.attrs;
  const stage = exported(a, file, n.where);
  if (n.type === NODE.COMP) {
    const us = a.get("compute_us") ?? n.dur ?? 0;
    if (typeof us !== "number" || !Number.isFinite(us) || us < 0 || us > MAX_COMPUTE_US) throw new TraceError(file, `${n.where}: compute_us is ${quoted(us)}, expected a number of microseconds from 0 to ${MAX_COMPUTE_US}`);
    return { op: "compute", name: "compute", dtype: "float32", traceDtype: "float", inCount: 0, outCount: 0, group: world, inPlace: false, async: false, durUs: us, stage, node: n.where };
  }
  const p2p = n.type === NODE.SEND ? "send" : n.type === NODE.RECV ? "recv" : undefined;
  let op: TraceOp;
  let name: string;
  if (p2p) {
    op = p2p;
    name = p2p;
  } else {
    const t = Number(a.get("comm_type"));
    if (!Object.hasOwn(COMM, t)) {
      dropped.push({ what: `comm_type ${quoted(a.get("comm_type"))}`, why: "not a CollectiveCommType of et_def.proto" });
      return undefined;
    }
    op = COMM[t]!;
    name = COMM_NAME[t]!;
  }
  // The dtype: the node's own tensor type, else the CPU op's it depends on, else bytes.
  const own = tensorType(n.types) ?? n.dataDeps.map((d) => cpuTypes.get(d)).find((t) => t !== undefined);
  const dtypeAttr = a.get("dtype");
  const traceDtype = typeof dtypeAttr === "string" ? dtypeAttr : own ?? "Byte";
  const dtype: DType | undefined = jobDtype(traceDtype);
  if (!dtype) {
    dropped.push({ what: name, why: `dtype ${quoted(traceDtype)} has no job dtype` });
    return undefined;
  }
  const bytes = count(a.get("comm_size") ?? 0, file, n.where, "comm_size");
  const width = traceElementBytes(traceDtype) ?? ELEMENT_BYTES[dtype];
  if (bytes % width !== 0) throw new TraceError(file, `${n.where}: comm_size ${bytes} is not a whole number of ${traceDtype} elements (${width} bytes)`);
  const elements = bytes / width;
  const pgName = a.get("pg_name");
  const group = typeof pgName === "string" && pgName !== "" && groups.has(pgName) ? groups.get(pgName)! : world;
  if (typeof pgName === "string" && pgName !== "" && !groups.has(pgName) && groups.size > 0) throw new TraceError(file, `${n.where}: process group ${quoted(pgName)} is in no process_groups list`);
  const splits = (key: string) => {
    const v = a.get(key);
    if (v === undefined) return [];
    if (!Array.isArray(v) || v.length > MAX_WORLD) throw new TraceError(file, `${n.where}: ${key} is not a list of counts`);
    return v.map((x) => count(Number(x), file, n.where, `an entry of ${key}`));
  };
  const inSplits = splits("in_split"), outSplits = splits("out_split");
  const rootAttr = a.get("root");
  const peerAttr = a.get(p2p === "send" ? "comm_dst" : "comm_src");
  if (p2p && peerAttr === undefined) throw new TraceError(file, `${n.where}: a ${p2p} node without ${p2p === "send" ? "comm_dst" : "comm_src"}`);
  return {
    op: op === "all_to_all" && inSplits.length ? "all_to_allv" : op, name, dtype, traceDtype,
    inCount: elements, outCount: count(outputOf(op, elements, group.ranks.length), file, n.where, "its out elements"),
    inSplits, outSplits, group,
    root: ROOTED.has(op) ? (rootAttr === undefined ? group.ranks[0] ?? 0 : rankOf(rootAttr, file, n.where, "root")) : undefined,
    peer: p2p ? rankOf(peerAttr, file, n.where, p2p === "send" ? "comm_dst" : "comm_src") : undefined,
    tag: p2p && a.has("comm_tag") ? count(a.get("comm_tag"), file, n.where, "comm_tag") : undefined,
    node: n.where,
    inPlace: a.get("in_place") === true, async: false, durUs: n.dur, stage,
  };
}

/** A compute stage longer than an hour is a mistake, not a step. */
const MAX_COMPUTE_US = 3.6e9;
/** The job's stage ops (the schema's), which an export's stage_op names. */
const STAGE_OPS = new Set(stageSchema.options.map((o) => o.shape.op.value as string));
/** Fields an export's stage_options may not set: the importer writes them from the trace itself. */
const STRUCTURAL = new Set(["id", "op", "input", "inputs", "after", "stream", "group", "root", "counts", "us", "shift", "reduce", "inPlace"]);

/** What `runner trace export` wrote beside a node's Chakra fields; undefined for a node it did not write. */
function exported(a: Map<string, unknown>, file: string, where: string): TraceCollective["stage"] {
  const op = a.get("stage_op");
  if (op === undefined) return undefined;
  const bad = (what: string, value: unknown, expected: string) => new TraceError(file, `${where}: ${what} is ${quoted(value)}, expected ${expected}`);
  if (typeof op !== "string" || !STAGE_OPS.has(op)) throw bad("stage_op", op, "a job stage op");
  const reduce = a.get("reduce_op"), stream = a.get("stream"), options = a.get("stage_options"), counts = a.get("tensor_counts");
  if (reduce !== undefined && !reduceOpSchema.safeParse(reduce).success) throw bad("reduce_op", reduce, `one of ${reduceOpSchema.options.join(", ")}`);
  if (stream !== undefined && (typeof stream !== "string" || !/^[A-Za-z0-9_.-]{1,64}$/.test(stream))) throw bad("stream", stream, "a stream name");
  let parsed: unknown;
  if (options !== undefined) {
    try {
      parsed = JSON.parse(typeof options === "string" && options.length <= 4096 ? options : "null");
    } catch {
      parsed = null;
    }
    if (!isPlainObject(parsed) || Object.keys(parsed).some((k) => STRUCTURAL.has(k))) throw bad("stage_options", options, "a JSON object of at most 4096 bytes of the op's options");
  }
  if (counts !== undefined && (!Array.isArray(counts) || counts.length > 4096)) throw bad("tensor_counts", counts, "a list of counts");
  return {
    op, reduce: reduce as string | undefined, stream: stream as string | undefined, options: parsed as Record<string, unknown> | undefined,
    tensorCounts: (counts as unknown[] | undefined)?.map((x) => count(Number(x), file, where, "an entry of tensor_counts")),
  };
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);
