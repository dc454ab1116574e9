// The experiment file (DESIGN.md, "Experiments"): JSON with comments naming jobs, a matrix of backends, world
// sizes, hosts and variants, and how to run, repeat, measure and compare them.
import path from "node:path";
import * as z from "zod";
import { parseCommentedWith } from "../config/load.js";
import { readInputText } from "../config/read-input.js";
import { schemaRef } from "../config/job.js";
import { runConfigSchema } from "../config/run-config.js";

const NAME = /^[A-Za-z_][A-Za-z0-9_.-]*$/;

/** A control character (C0, DEL): in a batch script or a command line a newline starts a line of its own. */
const CONTROL_RANGE = "\\u0000-\\u001f\\u007f";
export const CONTROL = new RegExp(`[${CONTROL_RANGE}]`);

/** Text that reaches a batch script or a command line (names, paths, options, env values): one line, no control characters. */
const line = () => z.string().regex(new RegExp(`^[^${CONTROL_RANGE}]*$`), {
  error: (i) => `expected text without control characters (newline, CR, NUL, ...), which would reach a batch script or command line as they are; got ${JSON.stringify(i.input)}`,
});
const name = (what: string) => z.string().regex(NAME, { error: (i) => `expected a ${what} name (a letter or "_", then letters, digits, "_", "." or "-"), got ${JSON.stringify(i.input)}` });

export const variantSchema = z.strictObject({
  env: z
    .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: (i) => `expected an environment variable name ([A-Za-z_][A-Za-z0-9_]*), got ${JSON.stringify(i.input)}` }), line())
    .default({})
    .describe("Set in every rank's environment; the names as sh takes them (written into batch scripts and dry runs)"),
  overrides: z
    .record(z.string(), z.unknown())
    .default({})
    .describe("Merged into the job's JSON (objects key by key, anything else replaced) before it is validated"),
});

const backend = runConfigSchema.shape.backend.unwrap();
const axis = <T extends z.ZodType>(item: T) => z.array(item).min(1);

export const AXES = ["job", "backend", "world_size", "hosts", "variant"] as const;
export type Axis = (typeof AXES)[number];
/** The axes a matrix can cross (jobs come from "jobs"). */
const MATRIX_AXES = ["backend", "world_size", "hosts", "variant"] as const;

const matrixSchema = z.strictObject({
  backend: axis(backend).default(["auto"]).describe("The backends each job runs on"),
  world_size: axis(z.int().min(1)).describe("The numbers of ranks each job runs at"),
  hosts: axis(z.int().min(1)).default([1]).describe("The numbers of hosts the ranks spread over"),
  variant: z
    .record(name("variant"), variantSchema)
    .default({ base: { env: {}, overrides: {} } })
    .describe("Named variants of each job: an environment and overrides"),
}).describe("The axes crossed with each other and with `jobs`: every combination is a point, unless `zip` ties axes together");

const percent = z.union([
  z.number().min(0),
  z.string().regex(/^\d+(\.\d+)?%$/, { error: (i) => `expected a fraction or a percentage like "5%", got ${JSON.stringify(i.input)}` }),
]).transform((v) => (typeof v === "number" ? v : Number(v.slice(0, -1)) / 100));

/** Executors (DESIGN.md, "Experiments"): where and how a point's ranks are started. */
const executorSchema = z.discriminatedUnion("kind", [
  z.strictObject({ kind: z.literal("local") }).describe("`runner launch -n W` on this host (backend mpi and hosts > 1 are refused)"),
  z.strictObject({
    kind: z.literal("mpirun"),
    command: line().min(1).default("mpirun").describe("The mpirun to run (mpirun, mpiexec.mpich, a full path)"),
    hostfile: line().min(1).optional().describe("mpirun's --hostfile, relative to the experiment file"),
    args: z.array(line()).default([]).describe("More mpirun arguments, one per item"),
  }).describe("`mpirun -np W [--hostfile F] [--map-by ppr:⌈W/H⌉:node] ARGS`"),
  z.strictObject({
    kind: z.literal("slurm"),
    mode: z
      .enum(["pack", "array"])
      .default("pack")
      .describe('"pack": one batch job per shape, repetitions interleaved inside it; "array": a task per point'),
    throttle: z.int().min(1).default(4).describe("Array mode with `concurrent`: at most this many array tasks at once (`%throttle`); otherwise one"),
    serialize: z.boolean().default(false).describe("Chains the campaign's batch jobs with afterany even where `concurrent` lets repetitions share nodes"),
    concurrent: z
      .boolean()
      .default(false)
      .describe("Lets repetitions share nodes and run at the same time (no --exclusive, jobs not chained, arrays by throttle): by default each runs alone, since repetitions that run together measure each other"),
    partition: line().min(1).optional().describe("sbatch --partition"),
    time: line().min(1).default("00:30:00").describe("The batch job's time limit, as sbatch --time takes it"),
    sbatch: z.array(line()).default([]).describe('More sbatch options, one per item (["--account=x"])'),
  }).describe("Writes batch scripts and submits them with sbatch"),
]);

export const experimentSchema = z.strictObject({
  $schema: schemaRef,
  name: name("campaign").describe("Names the campaign"),
  jobs: z.array(line().min(1)).min(1).describe("Job files, relative to the experiment file"),
  matrix: matrixSchema,
  zip: z
    .array(z.array(z.enum(MATRIX_AXES)).min(2))
    .default([])
    .describe('Axes that advance together instead of crossing: [["world_size", "hosts"]]'),
  exclude: z.array(z.strictObject({
    job: z.string().optional().describe("A job by its `name`"),
    backend: backend.optional().describe("A backend"),
    world_size: z.int().optional().describe("A world size"),
    hosts: z.int().optional().describe("A number of hosts"),
    variant: z.string().optional().describe("A variant's name"),
  })).default([]).describe("Points to leave out: every key given must match"),
  repetitions: z.int().min(1).default(1).describe("Runs of each point"),
  order: z
    .enum(["interleaved", "randomized", "blocked"])
    .default("interleaved")
    .describe('The order repetitions run in. "interleaved": every point once, then again (drift hits all points alike); "blocked": a point\'s repetitions back to back; "randomized": a shuffle that `seed` fixes'),
  seed: z.int().min(0).default(0).describe("The randomized order's seed: the same seed, the same order"),
  executor: executorSchema.default({ kind: "local" }).describe("Where and how a point's ranks are started"),
  metrics: z
    .record(z.string(), z.enum(["higher", "lower"]))
    .default({ busbw: "higher", "time.avg_us": "lower" })
    .describe("Metrics of a row (busbw, algbw, time.p50_us, rel_error, ...) and which way is better"),
  compare: z.strictObject({
    baseline: z.string().min(1).optional().describe("A campaign directory to compare against, relative to the experiment file"),
    tolerance: z.record(z.string(), percent).default({}).describe('Per metric: a change smaller than this (a fraction, or "5%") is no change'),
  }).default({ tolerance: {} }).describe("How the campaign's results are compared with a baseline's"),
});

export type Experiment = z.output<typeof experimentSchema>;
export type Variant = z.output<typeof variantSchema>;
export type Executor = Experiment["executor"];

/** An experiment file with its paths resolved against its own folder. */
export interface LoadedExperiment extends Experiment {
  file: string;
  jobPaths: string[];
  baselineDir?: string;
}

export function loadExperiment(file: string): LoadedExperiment {
  const exp = parseCommentedWith(experimentSchema, readInputText(file), file);
  const here = path.dirname(path.resolve(file));
  // The hostfile, like the jobs, is relative to the experiment file.
  const executor = exp.executor.kind === "mpirun" && exp.executor.hostfile ? { ...exp.executor, hostfile: path.resolve(here, exp.executor.hostfile) } : exp.executor;
  return {
    ...exp,
    executor,
    file,
    jobPaths: exp.jobs.map((j) => path.resolve(here, j)),
    baselineDir: exp.compare.baseline === undefined ? undefined : path.resolve(here, exp.compare.baseline),
  };
}
