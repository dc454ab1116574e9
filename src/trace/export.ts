// `runner trace export JOB.json -o DIR`: any job (hand-written or imported) as Chakra execution traces, one
// `<name>.<rank>.et` per rank, so simulators that read Chakra (ASTRA-sim) take what this tool replays. Each
// collective stage is a COMM_COLL_NODE (comm_type, comm_size in bytes, pg_name, and the tensor type in its
// inputs), send_recv a COMM_SEND_NODE and a COMM_RECV_NODE, compute a COMP_NODE of its duration; each node
// depends (ctrl_deps) on the one before it on its stream and (data_deps) on the stages it waits for (`after`).
// What Chakra has no field for (the job's op, reduce op, in-place, stream, the op's options, each tensor's count)
// travels as node attributes. The GlobalMetadata records the world size, the rank and the process groups, so
// `trace import` of the files gives back every stage, tensor and edge of the job (names aside).
import path from "node:path";
import type { DType, Job, Stage } from "../config/job.js";
import { ELEMENT_BYTES } from "../config/job.js";
import { loadJob } from "../config/load.js";
import { jobGroups } from "../graph/groups.js";
import { topologicalOrder } from "../graph/schedule.js";
import { makeDirectory, writeFileAtomic } from "../report/write-atomic.js";
import { chakraCodec, NODE } from "./chakra.js";
import { TraceError } from "./model.js";

/** CollectiveCommType by job op (et_def.proto). */
const COMM_TYPE: Record<string, number> = {
  allreduce: 0, quantized_allreduce: 0, compressed_allreduce: 0, reduce: 1, all_gather: 2, gather: 3, igather: 3, scatter: 4, broadcast: 5,
  all_to_all: 6, all_to_allv: 6, reduce_scatter: 7, barrier: 9,
};

/** The c10 tensor type names PyTorch writes (and the importer reads back). */
const TENSOR_TYPE: Record<DType, string> = { float32: "float", float64: "double", float16: "c10::Half", bfloat16: "c10::BFloat16", int64: "long int", int32: "int" };

type Attr = Record<string, unknown>;
const str = (name: string, v: string): Attr => ({ name, string_val: v });
const int = (name: string, v: number): Attr => ({ name, int64_val: v });
const bool = (name: string, v: boolean): Attr => ({ name, bool_val: v });
const ints = (name: string, v: number[]): Attr => ({ name, int64_list: { values: v } });

export interface ExportOptions {
  output: string;
  /** The world size for a job that records none. */
  world?: number;
}

/** Fields the node's own Chakra fields or the attributes above already carry. */
const STRUCTURAL = new Set(["id", "op", "input", "inputs", "after", "stream", "group", "root", "counts", "us", "shift", "reduce", "inPlace"]);

/** The reduce op, in-place, and the op's other options (bits, algorithm...) as one JSON attribute. */
function stageAttrs(stage: Stage & Record<string, unknown>): Attr[] {
  const options = Object.fromEntries(Object.entries(stage).filter(([k, v]) => !STRUCTURAL.has(k) && v !== undefined));
  return [
    ...(typeof stage.reduce === "string" ? [str("reduce_op", stage.reduce)] : []),
    ...(stage.inPlace === true ? [bool("in_place", true)] : []),
    ...(Object.keys(options).length ? [str("stage_options", JSON.stringify(options))] : []),
  ];
}

/** Writes one .et per rank; returns the files written. */
export async function exportJob(jobFile: string, options: ExportOptions): Promise<string[]> {
  const job = loadJob(jobFile);
  const W = job.worldSize ?? options.world;
  if (W === undefined) throw new TraceError(jobFile, "the job records no world size: give it with --world N");
  if (job.worldSize !== undefined && options.world !== undefined && options.world !== job.worldSize) {
    throw new TraceError(jobFile, `the job runs at ${job.worldSize} ranks only, not --world ${options.world}`);
  }
  // Groups that follow hosts (split: host/across) have no one answer off a machine: one host of W ranks.
  const partitions = jobGroups(job, W, [Array.from({ length: W }, (_, r) => r)]);
  const order = topologicalOrder(job.stages).map((i) => job.stages[i]!);
  const { pb, GlobalMetadata, Node } = await chakraCodec();
  const groupsList = [...partitions].flatMap(([name, parts]) => parts.map((ranks, k) => ({ pg_name: `${name}#${k}`, ranks })));
  makeDirectory(options.output);
  const files: string[] = [];
  for (let rank = 0; rank < W; rank++) {
    const writer = pb.Writer.create();
    GlobalMetadata.encodeDelimited(GlobalMetadata.fromObject({
      version: "0.0.4",
      attr: [str("schema", "spmd-runner-export"), int("world_size", W), int("rank", rank), str("process_groups", JSON.stringify([{ pg_name: "0", ranks: Array.from({ length: W }, (_, r) => r) }, ...groupsList])), str("job", job.name)],
    }), writer);
    for (const node of rankNodes(job, order, partitions, W, rank, jobFile)) Node.encodeDelimited(Node.fromObject(node), writer);
    const file = path.join(options.output, `${job.name}.${rank}.et`);
    writeFileAtomic(file, Buffer.from(writer.finish()));
    files.push(file);
  }
  return files;
}

/** The Chakra nodes of one rank, in schedule order. */
function rankNodes(job: Job, order: Stage[], partitions: Map<string, number[][]>, W: number, rank: number, file: string): Record<string, unknown>[] {
  const nodes: Record<string, unknown>[] = [];
  const lastOnStream = new Map<string, number>();
  const idsOf = new Map<string, number[]>();
  let id = 1;
  for (const s of order) {
    const stage = s as Stage & Record<string, unknown>;
    const where = `stage ${JSON.stringify(s.id)} (${s.op})`;
    const parts = typeof stage.group === "string" ? partitions.get(stage.group) : undefined;
    const k = parts ? parts.findIndex((p) => p.includes(rank)) : -1;
    const members = parts ? parts[k]! : Array.from({ length: W }, (_, r) => r);
    const pgName = parts ? `${stage.group as string}#${k}` : "0";
    const tensorOf = (name: unknown) => {
      const t = typeof name === "string" ? job.tensors[name] : undefined;
      if (!t) throw new TraceError(file, `${where}: names no tensor`);
      return t as { dtype: DType; count: number };
    };
    const stream = typeof stage.stream === "string" ? stage.stream : "main";
    // The stream's order as control dependencies, `after` as data dependencies (import reads them back apart).
    const prev = lastOnStream.get(stream);
    const after = [...new Set(((stage.after as string[] | undefined) ?? []).map((a) => idsOf.get(a)?.at(-1)).filter((d): d is number => d !== undefined))];
    const base = (name: string, type: number) => ({ id, name, type, ctrl_deps: prev === undefined ? [] : [prev], data_deps: after });
    const made: Record<string, unknown>[] = [];
    // What Chakra has no field for, as attributes the importer reads back (DESIGN.md, "Trace import", export).
    const carried = [str("stage_op", s.op), ...(stream !== "main" ? [str("stream", stream)] : []), ...stageAttrs(stage)];
    if (s.op === "compute") {
      made.push({ ...base(`compute ${s.id}`, NODE.COMP), duration_micros: Math.round(Number(stage.us)), attr: [bool("is_cpu_op", false), { name: "compute_us", double_val: Number(stage.us) }, ...carried] });
    } else if (s.op === "send_recv") {
      const t = tensorOf(stage.input);
      const shift = Number(stage.shift ?? 1);
      const bytes = t.count * ELEMENT_BYTES[t.dtype];
      const io = { values: "", shapes: `[[${t.count}]]`, types: `['Tensor(${TENSOR_TYPE[t.dtype]})']` };
      made.push({ ...base(`send ${s.id}`, NODE.SEND), inputs: io, attr: [bool("is_cpu_op", false), int("comm_dst", (((rank + shift) % W) + W) % W), int("comm_size", bytes), int("comm_tag", id), ...carried] });
      id++;
      made.push({ id, name: `recv ${s.id}`, type: NODE.RECV, ctrl_deps: [id - 1], inputs: io, attr: [bool("is_cpu_op", false), int("comm_src", (((rank - shift) % W) + W) % W), int("comm_size", bytes), int("comm_tag", id - 1), ...carried] });
    } else {
      const type = COMM_TYPE[s.op];
      if (type === undefined) throw new TraceError(file, `${where}: no Chakra collective type for ${s.op}`);
      const attr: Attr[] = [bool("is_cpu_op", false), int("comm_type", type), str("pg_name", pgName), ...carried];
      let io: Record<string, string> | undefined;
      if (s.op !== "barrier") {
        const names = Array.isArray(stage.inputs) ? (stage.inputs as string[]) : [stage.input];
        const ts = names.map(tensorOf);
        let elements = ts.reduce((n, t) => n + t.count, 0);
        const dtype = ts[0]!.dtype;
        if (s.op === "all_to_allv") {
          // This rank's row and column of its group's counts matrix.
          const matrices = stage.counts as number[][] | number[][][];
          const m = (Array.isArray(matrices[0]?.[0]) ? (matrices as number[][][])[Math.max(k, 0)] : matrices) as number[][];
          const i = members.indexOf(rank);
          const row = m[i]!, col = m.map((r) => r[i]!);
          elements = row.reduce((a, b) => a + b, 0);
          attr.push(ints("in_split", row), ints("out_split", col));
        }
        attr.push(int("comm_size", elements * ELEMENT_BYTES[dtype]), ints("tensor_counts", ts.map((t) => t.count)));
        io = { values: "", shapes: `[[${elements}]]`, types: `['Tensor(${TENSOR_TYPE[dtype]})']` };
      }
      if (typeof stage.root === "number") attr.push(int("root", members[stage.root] ?? stage.root));
      made.push({ ...base(`${s.op} ${s.id}`, NODE.COLL), ...(io ? { inputs: io } : {}), attr });
    }
    idsOf.set(s.id, made.map((n) => n.id as number));
    lastOnStream.set(stream, made.at(-1)!.id as number);
    nodes.push(...made);
    id++;
  }
  return nodes;
}
