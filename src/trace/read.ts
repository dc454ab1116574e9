// Trace files in, one RankTrace per trace out: plain or gzipped JSON, streamed (json-scan.ts) and cut down to
// what the readers use as it arrives; folders and archives read as their traces (source.ts); the format told
// from the document's own keys. A trace is untrusted: anything a reader did not expect becomes one line
// naming the file (exit 2), never a stack trace.
import { chakraJsonToProtobuf, isChakraJson, readChakra } from "./chakra.js";
import { readExecutionTrace } from "./et.js";
import { JsonScanner } from "./json-scan.js";
import { readKineto } from "./kineto.js";
import { DEFAULT_MAX_BYTES, MAX_COLLECTIVES } from "./limits.js";
import type { RankTrace } from "./model.js";
import { TraceError } from "./model.js";
import { rankFromFileName } from "./names.js";
import { finishRanks, type ReadRank, type WorldHint } from "./rank.js";
import { forEachTrace, peek, traceFiles } from "./source.js";

export { traceFiles } from "./source.js";

/** A JSON trace as the readers see it: the top-level values, and the nodes or events they may use. */
export interface JsonTrace {
  file: string;
  top: Record<string, unknown>;
  /** ET nodes: record_param_comms, the process-group table, ProfilerStep#N. */
  nodes: Record<string, unknown>[];
  /** Kineto events: NCCL kernels, record_param_comms and nccl:<op> CPU ops, ProfilerStep#N. */
  events: Record<string, unknown>[];
  /** Kineto kernel launches: correlation id -> the launch's ts (to place a kernel in its CPU op and step). */
  launches: Map<number, number>;
  /** Every kernel event, NCCL or not (a world-size-1 trace has thousands and no NCCL ones). */
  kernels: number;
}

export interface ReadOptions {
  maxBytes?: number;
  /** --world: the world where a trace records none (ET 1.0.1, Chakra). */
  world?: number;
}

const STEP = /^ProfilerStep#\d+$/;
const ET_NAMES = new Set(["record_param_comms", "## process_group:init ##"]);
const MAX_LAUNCHES = 4_000_000;

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

/** The attrs the ET reader reads; the rest of a kept node's attrs (and its shapes) are dropped as it streams in. */
const ET_ATTRS = new Set(["collective_name", "dtype", "in_msg_nelems", "out_msg_nelems", "in_split_size", "out_split_size", "pg_name", "pg_size", "global_rank_start", "global_rank_stride"]);

function slimNode(v: Record<string, unknown>): Record<string, unknown> {
  if (Array.isArray(v.attrs)) v.attrs = v.attrs.filter((a) => !isObject(a) || typeof a.name !== "string" || ET_ATTRS.has(a.name));
  for (const side of [v.inputs, v.outputs]) if (isObject(side)) delete side.shapes;
  delete v.input_shapes;
  delete v.output_shapes;
  return v;
}

/** What of a Kineto event the readers use; the rest (most of a trace) is dropped as it streams past. */
function keepEvent(e: Record<string, unknown>, doc: JsonTrace): boolean {
  const name = e.name, cat = e.cat;
  if (typeof name !== "string") return false;
  if (cat === "kernel") {
    doc.kernels++;
    return /nccl/i.test(name);
  }
  if ((cat === "cuda_runtime" || cat === "cuda_driver") && /launch/i.test(name)) {
    const args = e.args as Record<string, unknown> | undefined;
    const corr = isObject(args) ? args.correlation : undefined;
    if (typeof corr === "number" && typeof e.ts === "number" && doc.launches.size < MAX_LAUNCHES) doc.launches.set(corr, e.ts);
    return false;
  }
  if (cat === "gpu_user_annotation") return false;
  return name === "record_param_comms" || name.startsWith("nccl:") || STEP.test(name);
}

/** One JSON trace, streamed: what the readers use is kept, element by element. */
async function scanJson(name: string, chunks: AsyncIterable<Buffer>): Promise<JsonTrace> {
  const doc: JsonTrace = { file: name, top: {}, nodes: [], events: [], launches: new Map(), kernels: 0 };
  const scanner = new JsonScanner({
    file: name,
    split: new Set(["nodes", "traceEvents"]),
    onElement(key, _index, v) {
      if (!isObject(v)) return;
      if (key === "nodes" ? typeof v.name === "string" && (ET_NAMES.has(v.name) || STEP.test(v.name)) : keepEvent(v, doc)) {
        const list = key === "nodes" ? doc.nodes : doc.events;
        // A collective is a node and its wait (ET), or a kernel, its CPU op and annotation (Kineto).
        const cap = (key === "nodes" ? 2 : 4) * MAX_COLLECTIVES;
        if (list.length >= cap) throw new TraceError(name, `more than ${cap} collective ${key === "nodes" ? "nodes" : "events"} (the importer's cap is ${MAX_COLLECTIVES} collectives)`);
        list.push(key === "nodes" ? slimNode(v) : v);
      }
    },
  });
  for await (const chunk of chunks) scanner.write(chunk);
  doc.top = scanner.end();
  return doc;
}

/** A Chakra trace (protobuf or its JSON form) is decoded from one buffer: at most 1 GiB (or --max-bytes, if lower). */
const MAX_CHAKRA_BYTES = 1024 ** 3;

async function collect(name: string, chunks: AsyncIterable<Buffer>, max: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  let total = 0;
  for await (const c of chunks) {
    total += c.length;
    if (total > max) throw new TraceError(name, `a Chakra trace of more than ${max} bytes (the cap on one held in memory)`);
    parts.push(c);
  }
  return Buffer.concat(parts);
}

/** One trace's bytes -> its rank's collectives (world not yet settled where the trace records none). */
async function readOne(name: string, chakra: boolean, chunks: AsyncIterable<Buffer>, options: ReadOptions): Promise<ReadRank> {
  const hint = { fileRank: rankFromFileName(name) };
  const peeked = await peek(chunks, 256);
  const whole = () => collect(name, peeked.chunks, Math.min(MAX_CHAKRA_BYTES, options.maxBytes ?? DEFAULT_MAX_BYTES));
  if (chakra) return readChakra(await whole(), name, { ...hint, world: options.world });
  if (isChakraJson(peeked.head)) {
    return readChakra(await chakraJsonToProtobuf((await whole()).toString("utf8"), name), name, { ...hint, world: options.world });
  }
  const doc = await scanJson(name, peeked.chunks);
  try {
    if ("nodes" in doc.top || ("schema" in doc.top && !("traceEvents" in doc.top))) return readExecutionTrace(doc, hint);
    if (doc.top.traceEvents === true) return readKineto(doc, hint);
  } catch (error) {
    if (error instanceof TraceError) throw error;
    // A shape no check foresaw: still one line naming the file.
    throw new TraceError(name, `malformed trace: ${(error as Error).message}`);
  }
  throw new TraceError(name, 'not a trace this importer knows: expected a PyTorch Execution Trace ("schema", "nodes"), a Kineto trace ("traceEvents") or a Chakra trace (*.et, or its JSON form)');
}

/** Every trace in the paths given (files, folders, archives), read and with its rank and world settled. */
export async function readTraces(paths: readonly string[], options: ReadOptions = {}): Promise<{ files: string[]; traces: RankTrace[] }> {
  const files = await traceFiles(paths);
  const read: ReadRank[] = [];
  await forEachTrace(files, options.maxBytes ?? DEFAULT_MAX_BYTES, async (t) => {
    read.push(await readOne(t.name, t.chakra, t.chunks, options));
  });
  const hint: WorldHint = { world: options.world, files: read.length };
  return { files: read.map((r) => r.file), traces: finishRanks(read, hint) };
}

/** One trace file read on its own (tests). */
export async function readTrace(file: string, options: ReadOptions = {}): Promise<RankTrace> {
  const { traces } = await readTraces([file], options);
  if (traces.length !== 1) throw new TraceError(file, `holds ${traces.length} traces, not one`);
  return traces[0]!;
}
