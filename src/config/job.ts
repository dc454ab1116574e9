import * as z from "zod";
import { describeValue } from "./errors.js";
import { SIZE_FORMS, sizeSchema } from "./size.js";

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

export const dtypeSchema = z
  .enum(["float32", "float64", "int32", "int64", "float16", "bfloat16"])
  .describe("Element type; float16 and bfloat16 are stored in 16 bits and reduced in float32");
/** Bytes per element of each dtype. */
export const ELEMENT_BYTES = { float32: 4, float64: 8, int32: 4, int64: 8, float16: 2, bfloat16: 2 } as const satisfies Record<z.output<typeof dtypeSchema>, number>;
export const reduceOpSchema = z.enum(["sum", "mean", "max", "min"]);

const seed = z.int().min(0).default(0).describe("With the rank and the element's index, fixes each value");

export const fillSchema = z.discriminatedUnion("kind", [
  z.strictObject({
    kind: z.literal("normal"),
    seed,
    mean: z.number().default(0).describe("The distribution's mean"),
    std: z.number().min(0).default(1).describe("The distribution's standard deviation"),
  }).describe("Normally distributed values"),
  z
    .strictObject({
      kind: z.literal("uniform"),
      seed,
      low: z.number().default(-1).describe("Lowest value"),
      high: z.number().default(1).describe("The values stay below it"),
    })
    .describe("Uniformly distributed values from low up to high")
    .superRefine((fill, ctx) => {
      if (fill.low >= fill.high) {
        ctx.addIssue({ code: "custom", message: `expected low < high, got low ${fill.low} and high ${fill.high}` });
      }
    }),
  z
    .strictObject({
      kind: z.literal("integers"),
      seed,
      low: z.int().default(-4).describe("Lowest value"),
      high: z.int().default(4).describe("Highest value"),
    })
    .describe("Uniformly distributed whole numbers from low to high, both included")
    .superRefine((fill, ctx) => {
      if (fill.low > fill.high) {
        ctx.addIssue({ code: "custom", message: `expected low <= high, got low ${fill.low} and high ${fill.high}` });
      }
    }),
  z.strictObject({ kind: z.literal("constant"), value: z.number().describe("Every element's value") }).describe("One value everywhere"),
  z.strictObject({ kind: z.literal("rank") }).describe("Every element is the rank's number"),
]);

export const tensorSchema = z.strictObject({
  dtype: dtypeSchema,
  count: sizeSchema.describe(`Elements of the tensor on each rank (a sweep's count replaces it): ${SIZE_FORMS}`),
  fill: fillSchema
    .default({ kind: "integers", seed: 1, low: -4, high: 4 })
    .describe("How each rank's values are made: a pure function of (seed, rank, index), so `check` can regenerate any rank's input"),
});

/** What each algorithm a stage may name does, for the field's description. */
const ALGORITHMS: Record<string, string> = {
  auto: "the runner picks (on mpi, nccl and hccl the library's own collective)",
  ring: "around a ring of the ranks",
  tree: "a binomial tree",
  direct: "point to point, straight between the ranks that exchange data",
  hierarchical: "inside each host, then across hosts among the ranks of equal local index where every host holds the same number (at least 2) of ranks, else the ring",
  shared: "the shm backend's own, through the shared segment",
  dissemination: "the dissemination barrier",
};

/** Every op has "auto" (the runner picks) plus the algorithms implemented for it. */
function algorithm<const A extends readonly string[]>(...names: A) {
  const says = ["auto", ...names].map((n) => `${n}: ${ALGORITHMS[n]}`).join("; ");
  return z.enum(["auto", ...names]).default("auto").describe(says);
}

const common = {
  id: stageId.describe("Names the stage in `after`, sweep params, rows and dumps"),
  after: z.array(stageId).optional().describe("Stages that must complete before this one starts, on any stream"),
  timeoutSec: z.number().positive().optional().describe("Deadline in seconds for this stage's op; default the job's `timeoutSec`"),
  // DESIGN.md, "Graphs, streams and groups". No default stream here: igather's is its own (graph/streams.ts).
  group: groupName
    .optional()
    .describe("A partition in `groups`: the stage runs inside every group of it at once; `root`, size, busbw and checks are then the group's"),
  stream: streamName
    .optional()
    .describe('The stream the stage runs on, in order with the stream\'s other stages (default "main"; igather\'s is its own); stages on different streams are in flight at once'),
  inPlace: z
    .boolean()
    .optional()
    .describe("nccl-tests' in-place form: one buffer is input and output (allreduce, reduce_scatter, all_gather, broadcast, all_to_all, reduce); the input is put back, untimed, before each step"),
};
const input = z.string().describe("The tensor the stage reads, by its name in `tensors`");
const root = z.int().min(0).default(0).describe("The rank that holds the result or the data; inside a `group`, the group-local index");
const reduce = reduceOpSchema.default("sum").describe("How the ranks' values combine (mean: float tensors only)");

function stage<const Op extends string, Shape extends z.core.$ZodLooseShape>(op: Op, shape: Shape) {
  return z.strictObject({ ...common, op: z.literal(op), ...shape });
}

// "shared": the shm backend's algorithms, which reduce and copy straight out of the shared segment.
const rootedOp = <const Op extends string, const A extends readonly string[]>(op: Op, what: string, ...extra: A) =>
  stage(op, { input, root, algorithm: algorithm("direct", "tree", ...extra) }).describe(what);

const reduceScatter = stage("reduce_scatter", {
  input: input.optional(),
  inputs: z.array(input).min(1).optional().describe('Tensors to reduce-scatter together, with `coalesced`; give this or `input`'),
  coalesced: z
    .boolean()
    .default(false)
    .describe("DeepSpeed's reduce_scatter_coalesced: one flat collective over every tensor in `inputs`, rank r getting block r of each"),
  reduce,
  algorithm: algorithm("ring", "direct", "shared"),
}).describe("Rank r ends with block r of the reduction of every rank's input").superRefine((s, ctx) => {
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

/** An estimating stage's own `--dump-dir`. */
const dumpDir = z.string().min(1).optional().describe("This stage's `--dump-dir` (the flag overrides it): each rank writes DIR/<stage>/rank<r>.output.npy, its inputs and error-feedback buffers");

const bits = z.union([z.literal(4), z.literal(8)]).describe("Bits per code: 8 (int8) or 4 (int4)");

// ZeRO++'s qgZ (DESIGN.md, Stages, quantized_allreduce). groupSize 2048: a step's 4 bytes cost 0.2% of an
// int8 group's bytes (0.4% of an int4 group's), while groups stay small enough to keep outliers local.
const quantizedAllreduce = stage("quantized_allreduce", {
  input,
  bits: bits.default(8),
  groupSize: z.int().min(2).max(2 ** 30).multipleOf(2).default(2048).describe("Values per quantization group, whose step travels as one float32; even"),
  reduce: z.enum(["sum", "mean"]).default("sum").describe("The sum or the mean of the ranks' inputs"),
  output: z
    .enum(["shard", "full"])
    .default("shard")
    .describe('"shard": rank r holds block r (a reduce_scatter); "full": then a quantized all-gather, so every rank holds every value (an allreduce)'),
  gatherBits: bits.optional().describe('Bits per code of the all-gather with `output` "full"; default `bits`'),
  nodes: z.int().min(1).optional().describe("Simulates this many nodes on one host (ranks node·localSize + local); without `nodes` and `localSize` the hosts the ranks run on are the nodes"),
  localSize: z.int().min(1).optional().describe("Ranks per simulated node; `nodes` × `localSize` must be the world size"),
  errorFeedback: z
    .strictObject({ beta: z.number().min(0).max(1).default(1).describe("The share of the kept error added back") })
    .optional()
    .describe("Each quantization keeps what it lost and adds beta times it to what it quantizes next step (LoCo)"),
  // Groups of each block per pipelined piece (host memory): the results are the same bits whatever it is.
  // Default, where the ranks run on several hosts: whole groups of at least 256 Ki values, where a block holds
  // 4 of them; else one piece (within a host pieces only cost).
  pieceGroups: z
    .int()
    .min(1)
    .max(2 ** 40)
    .optional()
    .describe("Groups of each block per pipelined piece on host memory; default where the ranks span hosts: whole groups of at least 256 Ki values where a block holds 4 such pieces, else one piece. The results are the same bits whatever it is"),
  dumpDir,
  algorithm: algorithm(),
}).describe("ZeRO++ qgZ: a hierarchical reduce-scatter whose data travels as int8 or int4 codes; estimates the sum or mean of float tensors").superRefine((s, ctx) => {
  if (s.gatherBits !== undefined && s.output !== "full") {
    ctx.addIssue({ code: "custom", path: ["gatherBits"], message: '"gatherBits" needs "output": "full" (the shard output gathers nothing)' });
  }
});

/** A W×W matrix of element counts: row i is what rank i sends, entry j of it what goes to rank j. */
const countMatrix = z.array(z.array(sizeSchema)).min(1).describe("Row i is what rank i sends, entry j of it the elements that go to rank j").superRefine((rows, ctx) => {
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
  counts: z
    .union([countMatrix, z.array(countMatrix).min(1)])
    .describe("counts[i][j] elements go from rank i to rank j: one W×W matrix; with `group`, one G×G matrix every group uses, or a list of them, one per group in the groups' order"),
  algorithm: algorithm("direct", "shared"),
}).describe("Uneven all-to-all: rank i sends the first Σ_j counts[i][j] elements of its input, the block for rank 0 first; rank j's output holds the blocks in rank order");

export const stageSchema = z.discriminatedUnion("op", [
  // "hierarchical": inside each host, then across hosts (DESIGN.md, Stages, allreduce); the ring where the hosts are uneven.
  stage("allreduce", { input, reduce, algorithm: algorithm("ring", "tree", "direct", "hierarchical", "shared") })
    .describe("Every rank ends with the reduction of every rank's input"),
  reduceScatter,
  stage("all_gather", { input, algorithm: algorithm("ring", "direct", "shared") }).describe("Every rank ends with every rank's input, in rank order"),
  rootedOp("gather", "Every rank's input lands at `root`, in rank order", "shared"),
  rootedOp("igather", "A gather posted without waiting, on a stream of its own: it completes where a stage lists it in `after`, or at the step's end", "shared"),
  rootedOp("broadcast", "`root`'s input reaches every rank", "shared"),
  stage("reduce", { input, root, reduce, algorithm: algorithm("tree", "direct") }).describe("`root` ends with the reduction of every rank's input"),
  rootedOp("scatter", "`root`'s input, cut into one block per rank, block r to rank r"),
  stage("all_to_all", { input, algorithm: algorithm("direct", "shared") }).describe("Block j of rank i's input goes to rank j, which holds the blocks it receives in rank order"),
  allToAllv,
  stage("send_recv", {
    input,
    shift: z.int().default(1).describe("Rank r sends to rank r + shift and receives from rank r − shift, modulo the world (or group) size"),
    algorithm: algorithm("direct"),
  }).describe("A ring shift: every rank sends its input to one peer and receives another's"),
  stage("barrier", { algorithm: algorithm("dissemination", "shared") }).describe("No rank leaves until every rank has entered"),
  stage("compute", { us: z.number().min(0).describe("Microseconds of work per step"), algorithm: algorithm() })
    .describe("Busy work on each rank, for overlap experiments; moves no data"),
  // 1-bit allreduce with error feedback; always estimates the mean (DESIGN.md, Stages).
  stage("compressed_allreduce", {
    input,
    resetEvery: z
      .int()
      .min(1)
      .max(2 ** 30)
      .optional()
      .describe("Zeroes the worker and server errors every k steps (1 turns error feedback off); by default they persist across steps"),
    // Elements of each rank's chunk per pipelined piece (host memory), rounded up to 2048: the results are the
    // same bits whatever it is. Default, where the ranks run on several hosts: a quarter of the chunk, where
    // that is at least 1 Mi; else one piece.
    pieceValues: z
      .int()
      .min(1)
      .max(2 ** 40)
      .optional()
      .describe("Elements of each rank's chunk per pipelined piece on host memory, rounded up to 2048; default where the ranks span hosts: a quarter of the chunk where that is at least 1 Mi, else one piece. The results are the same bits whatever it is"),
    dumpDir,
    algorithm: algorithm(),
  }).describe("1-bit allreduce with error feedback (DeepSpeed's compressed_allreduce): estimates the mean of float tensors"),
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
  .strictObject({
    from: sizeSchema.describe(`The first count: ${SIZE_FORMS}`),
    to: sizeSchema.describe("No count exceeds it"),
    factor: z.number().gt(1).default(2).describe("Each count is the last times this (at least one more)"),
  })
  .describe("Counts from `from` to `to`, each `factor` times the last")
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
    count: z
      .union([sweepRange, z.array(sizeSchema).min(1).max(MAX_SWEEP_POINTS)])
      .optional()
      .describe("The counts every tensor runs at, one point each: a range or a list of sizes"),
    params: z
      .record(z.string().min(1), z.array(sweepValue).min(1))
      .optional()
      .describe('Stage options and their values: "algorithm" sets every stage that accepts the value, "<stage id>.<option>" that stage only; every count runs with every combination'),
  })
  .describe("Runs the job at every point (count and parameter values), each point with its own warmup and timed steps")
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
  z.strictObject({ split: z.enum(["host", "across"]).describe('"host": the ranks of each host; "across": one rank per host, groups by local index') })
    .describe("Groups by the hosts the ranks run on"),
  z.strictObject({ block: groupSize.describe("Ranks per group") }).describe("Groups of consecutive ranks: r in group ⌊r / block⌋"),
  z.strictObject({ stride: groupSize.describe("Number of groups") }).describe("Ranks `stride` apart: r in group r mod stride"),
  z.strictObject({ ranks: z.array(z.array(z.int().min(0)).min(1)).min(1).describe("The groups' ranks, every rank exactly once") })
    .describe("Groups listed rank by rank"),
]);

/** Where an imported job came from (`runner trace import`; DESIGN.md, "Trace import"). */
export const sourceSchema = z.strictObject({
  files: z.array(z.string()).min(1).describe("The trace files read"),
  format: z.enum(["pytorch-et", "kineto", "chakra", "flight-recorder"]).describe("The traces' format"),
  schema: z.string().describe("The trace's own schema version (ET `schema`, Kineto `schemaVersion`)"),
  worldSize: z.int().min(1).describe("The traced job's world size"),
  ranks: z.array(z.int().min(0)).min(1).describe("The ranks whose traces were read"),
  steps: z.string().optional().describe("Which profiled steps the job replays (ProfilerStep#N), in words"),
  trace_us: z.record(stageId, z.number().min(0)).optional().describe("The trace's own duration of a stage's collective in microseconds, by stage id (Kineto's kernel `dur`)"),
  dropped: z
    .array(z.strictObject({
      what: z.string().describe("What was left out"),
      count: z.int().min(1).describe("How many"),
      why: z.string().describe("Why"),
    }))
    .default([])
    .describe("What the import left out, and why"),
  notes: z.array(z.string()).default([]).describe("What a reader of the job should know: mappings that are not one to one, ranks that stood in for others"),
}).describe("Where an imported job came from (`runner trace import`)");

/**
 * The most ranks a job runs at, whoever counts them (`-n`, a launcher's variables, a job's `worldSize`, a trace):
 * said at once (exit 2) above it, where the launcher and planner would otherwise spend time and memory on each
 * rank of a world no host here holds. Traces of the largest jobs published (Chakra, Kineto) are far below it.
 */
export const MAX_WORLD = 65536;

/** `$schema` in every file: for editors. */
export const schemaRef = z.string().optional().describe("The JSON Schema an editor checks the file against; the runner ignores it");

export const jobSchema = z.strictObject({
  $schema: schemaRef,
  name: z.string().regex(/^[A-Za-z0-9_.-]{1,128}$/, {
    error: (issue) => `expected 1 to 128 letters, digits, "_", "." or "-", got ${describeValue(issue.input)}`,
  }).describe("Names the run: its run directory and results"),
  device: z
    .enum(["cpu", "cuda", "npu"])
    .default("cpu")
    .describe('Where the tensors live and the communicator moves them: "cpu" host memory, "cuda" NVIDIA GPUs (backend nccl), "npu" Ascend NPUs (backend hccl), in device memory for the whole run'),
  iterations: z.int().min(1).default(20).describe("Timed steps at each sweep point; a step runs every stage once"),
  warmup: z.int().min(0).default(5).describe("Untimed steps before the timed ones, at each sweep point"),
  check: z
    .boolean()
    .default(false)
    .describe("Verifies every stage's output against inputs regenerated on each rank: exact stages count wrong elements, estimating ones report relative error"),
  timeoutSec: z
    .number()
    .positive()
    .default(300)
    .describe("Deadline in seconds for each op; a stage's own `timeoutSec`, the run configuration's and `--timeout` override it"),
  worldSize: z.int().min(1).max(MAX_WORLD).optional().describe("The only world size the job runs at (an imported trace's); a launch at another is refused"),
  source: sourceSchema.optional(),
  tensors: z.record(tensorName, tensorSchema).default({}).describe("The tensors stages read, by name; every rank holds its own"),
  groups: z.record(groupName, groupSpecSchema).optional().describe("Named partitions of the ranks, for stages' `group`; each made once per run"),
  streams: z
    .array(streamName)
    .optional()
    .describe('The streams stages may name besides "main": given, a misspelt stream is an error. A job runs at most 4 streams'),
  stages: z
    .array(stageSchema)
    .min(1)
    .describe("The job graph: a step runs every stage once, each stream's stages in order (ties in declaration order), the streams at once"),
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
