import * as z from "zod";
import { describeValue } from "./errors.js";
import { sizeSchema } from "./size.js";

/** Tensor and stage names: usable as file names and CSV cells without quoting. */
const NAME = /^[A-Za-z_][A-Za-z0-9_.-]*$/;

function nameSchema(what: string) {
  return z.string().regex(NAME, {
    error: (issue) =>
      `expected a ${what} name (a letter or "_", then letters, digits, "_", "." or "-"), got ${describeValue(issue.input)}`,
  });
}

const tensorName = nameSchema("tensor");
const stageId = nameSchema("stage");
const groupName = nameSchema("group");
const streamName = nameSchema("stream");

export const dtypeSchema = z.enum(["float32", "float64", "int32", "int64", "float16", "bfloat16"]);
/** Bytes per element of each dtype. */
export const ELEMENT_BYTES = { float32: 4, float64: 8, int32: 4, int64: 8, float16: 2, bfloat16: 2 } as const satisfies Record<z.output<typeof dtypeSchema>, number>;
export const reduceOpSchema = z.enum(["sum", "mean", "max", "min"]);

const seed = z.int().min(0).default(0);

export const fillSchema = z.discriminatedUnion("kind", [
  z.strictObject({
    kind: z.literal("normal"),
    seed,
    mean: z.number().default(0),
    std: z.number().min(0).default(1),
  }),
  z
    .strictObject({
      kind: z.literal("uniform"),
      seed,
      low: z.number().default(-1),
      high: z.number().default(1),
    })
    .superRefine((fill, ctx) => {
      if (fill.low >= fill.high) {
        ctx.addIssue({ code: "custom", message: `expected low < high, got low ${fill.low} and high ${fill.high}` });
      }
    }),
  z
    .strictObject({
      kind: z.literal("integers"),
      seed,
      low: z.int().default(-4),
      high: z.int().default(4),
    })
    .superRefine((fill, ctx) => {
      if (fill.low > fill.high) {
        ctx.addIssue({ code: "custom", message: `expected low <= high, got low ${fill.low} and high ${fill.high}` });
      }
    }),
  z.strictObject({ kind: z.literal("constant"), value: z.number() }),
  z.strictObject({ kind: z.literal("rank") }),
]);

export const tensorSchema = z.strictObject({
  dtype: dtypeSchema,
  count: sizeSchema,
  fill: fillSchema.default({ kind: "integers", seed: 1, low: -4, high: 4 }),
});

/** Every op has "auto" (the runner picks) plus the algorithms implemented for it. */
function algorithm<const A extends readonly string[]>(...names: A) {
  return z.enum(["auto", ...names]).default("auto");
}

const common = {
  id: stageId,
  after: z.array(stageId).optional(),
  timeoutSec: z.number().positive().optional(),
  // DESIGN.md, "Graphs, streams and groups". No default stream here: igather's is its own (graph/streams.ts).
  group: groupName.optional(),
  stream: streamName.optional(),
  inPlace: z.boolean().optional(),
};
const input = z.string();
const root = z.int().min(0).default(0);
const reduce = reduceOpSchema.default("sum");

function stage<const Op extends string, Shape extends z.core.$ZodLooseShape>(op: Op, shape: Shape) {
  return z.strictObject({ ...common, op: z.literal(op), ...shape });
}

// "shared": the shm backend's algorithms, which reduce and copy straight out of the shared segment.
const rootedOp = <const Op extends string, const A extends readonly string[]>(op: Op, ...extra: A) =>
  stage(op, { input, root, algorithm: algorithm("direct", "tree", ...extra) });

const reduceScatter = stage("reduce_scatter", {
  input: input.optional(),
  inputs: z.array(input).min(1).optional(),
  coalesced: z.boolean().default(false),
  reduce,
  algorithm: algorithm("ring", "direct", "shared"),
}).superRefine((s, ctx) => {
  if (s.input !== undefined && s.inputs !== undefined) {
    ctx.addIssue({ code: "custom", path: ["inputs"], message: 'give either "input" or "inputs", not both' });
  } else if (s.input === undefined && s.inputs === undefined) {
    ctx.addIssue({ code: "custom", message: 'expected "input" (one tensor) or "inputs" (a list of tensors)' });
  } else if (s.coalesced && s.inputs === undefined) {
    ctx.addIssue({ code: "custom", path: ["coalesced"], message: '"coalesced": true needs "inputs" (a list of tensors)' });
  } else if (!s.coalesced && s.inputs !== undefined && s.inputs.length > 1) {
    ctx.addIssue({ code: "custom", path: ["inputs"], message: 'more than one tensor needs "coalesced": true' });
  }
});

const bits = z.union([z.literal(4), z.literal(8)]);

// ZeRO++'s qgZ (DESIGN.md, Stages, quantized_allreduce). groupSize 2048: a step's 4 bytes cost 0.2% of an
// int8 group's bytes (0.4% of an int4 group's), while groups stay small enough to keep outliers local.
const quantizedAllreduce = stage("quantized_allreduce", {
  input,
  bits: bits.default(8),
  groupSize: z.int().min(2).max(2 ** 30).multipleOf(2).default(2048),
  reduce: z.enum(["sum", "mean"]).default("sum"),
  output: z.enum(["shard", "full"]).default("shard"),
  gatherBits: bits.optional(),
  nodes: z.int().min(1).optional(),
  localSize: z.int().min(1).optional(),
  errorFeedback: z.strictObject({ beta: z.number().min(0).max(1).default(1) }).optional(),
  // Groups of each block per pipelined piece (host memory): the results are the same bits whatever it is.
  // Default, where the ranks run on several hosts: whole groups of at least 256 Ki values, where a block holds
  // 4 of them; else one piece (within a host pieces only cost).
  pieceGroups: z.int().min(1).max(2 ** 40).optional(),
  dumpDir: z.string().min(1).optional(),
  algorithm: algorithm(),
}).superRefine((s, ctx) => {
  if (s.gatherBits !== undefined && s.output !== "full") {
    ctx.addIssue({ code: "custom", path: ["gatherBits"], message: '"gatherBits" needs "output": "full" (the shard output gathers nothing)' });
  }
});

/** A W×W matrix of element counts: row i is what rank i sends, entry j of it what goes to rank j. */
const countMatrix = z.array(z.array(sizeSchema)).min(1).superRefine((rows, ctx) => {
  rows.forEach((row, i) => {
    if (row.length !== rows.length) {
      ctx.addIssue({ code: "custom", path: [i], message: `expected a square matrix: row ${i} has ${row.length} entries, the matrix ${rows.length} rows` });
    }
  });
});

// all_to_allv (DESIGN.md, Stages): one matrix for the world or for every group of a partition, or one per
// group in the groups' order. No in-place form: blocks of different sizes cannot share one buffer.
const allToAllv = stage("all_to_allv", {
  input,
  counts: z.union([countMatrix, z.array(countMatrix).min(1)]),
  algorithm: algorithm("direct", "shared"),
});

export const stageSchema = z.discriminatedUnion("op", [
  // "hierarchical": inside each host, then across hosts (DESIGN.md, Stages, allreduce); the ring where the hosts are uneven.
  stage("allreduce", { input, reduce, algorithm: algorithm("ring", "tree", "direct", "hierarchical", "shared") }),
  reduceScatter,
  stage("all_gather", { input, algorithm: algorithm("ring", "direct", "shared") }),
  rootedOp("gather", "shared"),
  rootedOp("igather", "shared"),
  rootedOp("broadcast", "shared"),
  stage("reduce", { input, root, reduce, algorithm: algorithm("tree", "direct") }),
  rootedOp("scatter"),
  stage("all_to_all", { input, algorithm: algorithm("direct", "shared") }),
  allToAllv,
  stage("send_recv", { input, shift: z.int().default(1), algorithm: algorithm("direct") }),
  stage("barrier", { algorithm: algorithm("dissemination", "shared") }),
  stage("compute", { us: z.number().min(0), algorithm: algorithm() }),
  // 1-bit allreduce with error feedback; always estimates the mean (DESIGN.md, Stages).
  stage("compressed_allreduce", {
    input,
    resetEvery: z.int().min(1).max(2 ** 30).optional(),
    // Elements of each rank's chunk per pipelined piece (host memory), rounded up to 2048: the results are the
    // same bits whatever it is. Default, where the ranks run on several hosts: a quarter of the chunk, where
    // that is at least 1 Mi; else one piece.
    pieceValues: z.int().min(1).max(2 ** 40).optional(),
    dumpDir: z.string().min(1).optional(),
    algorithm: algorithm(),
  }),
  quantizedAllreduce,
]);

/** Each point is a full run of the job: more than this is a mistake (a factor of 1.0001, say), not a plan. */
export const MAX_SWEEP_POINTS = 10_000;

/** The counts from `from` to `to`, each `factor` times the last (at least one more), stopping past `limit`. */
export function sweepRangePoints(from: number, to: number, factor: number, limit = Infinity): number[] {
  const points: number[] = [];
  for (let n = from; n <= to && points.length <= limit; n = Math.max(n + 1, Math.floor(n * factor))) points.push(n);
  return points;
}

const sweepRange = z
  .strictObject({ from: sizeSchema, to: sizeSchema, factor: z.number().gt(1).default(2) })
  .superRefine((range, ctx) => {
    if (range.from > range.to) {
      ctx.addIssue({ code: "custom", path: ["from"], message: `expected from <= to, got from ${range.from} and to ${range.to}` });
    } else if (sweepRangePoints(range.from, range.to, range.factor, MAX_SWEEP_POINTS).length > MAX_SWEEP_POINTS) {
      ctx.addIssue({
        code: "custom",
        path: ["factor"],
        message: `from ${range.from} to ${range.to} by a factor of ${range.factor} is more than ${MAX_SWEEP_POINTS} points`,
      });
    }
  });

const sweepValue = z.union([z.string(), z.number(), z.boolean()]);

export const sweepSchema = z
  .strictObject({
    count: z.union([sweepRange, z.array(sizeSchema).min(1).max(MAX_SWEEP_POINTS)]).optional(),
    // "algorithm": every stage that accepts the value; "<stage id>.<option>": that stage only.
    params: z.record(z.string().min(1), z.array(sweepValue).min(1)).optional(),
  })
  .superRefine((sweep, ctx) => {
    if (sweep.count === undefined && sweep.params === undefined) {
      ctx.addIssue({ code: "custom", message: 'expected "count", "params" or both' });
      return;
    }
    // Every count runs with every combination of the parameters' values.
    const counts = sweep.count === undefined ? 1 : Array.isArray(sweep.count) ? sweep.count.length : sweepRangePoints(sweep.count.from, sweep.count.to, sweep.count.factor, MAX_SWEEP_POINTS).length;
    const points = Object.values(sweep.params ?? {}).reduce((n, values) => n * values.length, counts);
    if (points > MAX_SWEEP_POINTS) {
      ctx.addIssue({ code: "custom", path: ["params"], message: `${points} points (counts times parameter combinations), more than ${MAX_SWEEP_POINTS}` });
    }
  });

const groupSize = z.int().min(1).max(1 << 20);

/** A partition of the ranks (DESIGN.md, "Graphs, streams and groups"); graph/groups.ts resolves it. */
export const groupSpecSchema = z.union([
  z.strictObject({ split: z.enum(["host", "across"]) }),
  z.strictObject({ block: groupSize }),
  z.strictObject({ stride: groupSize }),
  z.strictObject({ ranks: z.array(z.array(z.int().min(0)).min(1)).min(1) }),
]);

/** Where an imported job came from (`runner trace import`; DESIGN.md, "Trace import"). */
export const sourceSchema = z.strictObject({
  files: z.array(z.string()).min(1),
  format: z.enum(["pytorch-et", "kineto", "chakra", "flight-recorder"]),
  /** The trace's own schema version (ET `schema`, Kineto `schemaVersion`). */
  schema: z.string(),
  worldSize: z.int().min(1),
  /** The ranks whose traces were read. */
  ranks: z.array(z.int().min(0)).min(1),
  /** Which profiled steps the job replays (ProfilerStep#N), in words. */
  steps: z.string().optional(),
  /** The trace's own duration of a stage's collective, by stage id (Kineto's kernel `dur`). */
  trace_us: z.record(stageId, z.number().min(0)).optional(),
  /** What the import left out, and why. */
  dropped: z.array(z.strictObject({ what: z.string(), count: z.int().min(1), why: z.string() })).default([]),
  /** What a reader of the job should know: mappings that are not one to one, ranks that stood in for others. */
  notes: z.array(z.string()).default([]),
});

/**
 * The most ranks a job runs at, whoever counts them (`-n`, a launcher's variables, a job's `worldSize`, a trace):
 * said at once (exit 2) above it, where the launcher and planner would otherwise spend time and memory on each
 * rank of a world no host here holds. Traces of the largest jobs published (Chakra, Kineto) are far below it.
 */
export const MAX_WORLD = 65536;

export const jobSchema = z.strictObject({
  $schema: z.string().optional(),
  name: z.string().regex(/^[A-Za-z0-9_.-]{1,128}$/, {
    error: (issue) => `expected 1 to 128 letters, digits, "_", "." or "-", got ${describeValue(issue.input)}`,
  }),
  // Where the communicator moves data: "cuda" runs it on NVIDIA GPUs (backend nccl), "npu" on Ascend NPUs
  // (backend hccl). On those backends the tensors live in device memory for the whole run.
  device: z.enum(["cpu", "cuda", "npu"]).default("cpu"),
  iterations: z.int().min(1).default(20),
  warmup: z.int().min(0).default(5),
  check: z.boolean().default(false),
  timeoutSec: z.number().positive().default(300),
  // The only world size the job runs at (an imported trace's); a launch at another is refused.
  worldSize: z.int().min(1).max(MAX_WORLD).optional(),
  source: sourceSchema.optional(),
  tensors: z.record(tensorName, tensorSchema).default({}),
  groups: z.record(groupName, groupSpecSchema).optional(),
  // Optional: when given, every stage's stream must be "main" or one of these (a typo is then an error).
  streams: z.array(streamName).optional(),
  stages: z.array(stageSchema).min(1),
  sweep: sweepSchema.optional(),
});

export type Job = z.output<typeof jobSchema>;
export type Stage = z.output<typeof stageSchema>;
export type StageOp = Stage["op"];
export type TensorSpec = z.output<typeof tensorSchema>;
export type Fill = z.output<typeof fillSchema>;
export type DType = z.output<typeof dtypeSchema>;
export type ReduceOp = z.output<typeof reduceOpSchema>;
export type Sweep = z.output<typeof sweepSchema>;
export type GroupSpec = z.output<typeof groupSpecSchema>;
export type JobSource = z.output<typeof sourceSchema>;

/** The tensor names a stage reads, in declaration order. */
export function stageInputs(stage: Stage): string[] {
  if (stage.op === "reduce_scatter") return stage.inputs ?? (stage.input === undefined ? [] : [stage.input]);
  return "input" in stage ? [stage.input] : [];
}

/** Stages that combine values with a reduction operator. */
export function stageHasReduce(stage: Stage): stage is Extract<Stage, { reduce: ReduceOp }> {
  return "reduce" in stage;
}
