// The experiment file (DESIGN.md, "Experiments"): JSON with comments naming jobs, a matrix of backends, world
// sizes, hosts and variants, and how to run, repeat, measure and compare them.
import path from "node:path";
import * as z from "zod";
import { parseCommentedWith } from "../config/load.js";
import { readInputText } from "../config/read-input.js";
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
  /** Set in every rank's environment; the names as sh takes them (written into batch scripts and dry runs). */
  env: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: (i) => `expected an environment variable name ([A-Za-z_][A-Za-z0-9_]*), got ${JSON.stringify(i.input)}` }), line()).default({}),
  /** Merged into the job's JSON (objects key by key, anything else replaced) before it is validated. */
  overrides: z.record(z.string(), z.unknown()).default({}),
});

const backend = runConfigSchema.shape.backend.unwrap();
const axis = <T extends z.ZodType>(item: T) => z.array(item).min(1);

export const AXES = ["job", "backend", "world_size", "hosts", "variant"] as const;
export type Axis = (typeof AXES)[number];
/** The axes a matrix can cross (jobs come from "jobs"). */
const MATRIX_AXES = ["backend", "world_size", "hosts", "variant"] as const;

const matrixSchema = z.strictObject({
  backend: axis(backend).default(["auto"]),
  world_size: axis(z.int().min(1)),
  hosts: axis(z.int().min(1)).default([1]),
  variant: z.record(name("variant"), variantSchema).default({ base: { env: {}, overrides: {} } }),
});

const percent = z.union([
  z.number().min(0),
  z.string().regex(/^\d+(\.\d+)?%$/, { error: (i) => `expected a fraction or a percentage like "5%", got ${JSON.stringify(i.input)}` }),
]).transform((v) => (typeof v === "number" ? v : Number(v.slice(0, -1)) / 100));

/** Executors (DESIGN.md, "Experiments"): where and how a point's ranks are started. */
const executorSchema = z.discriminatedUnion("kind", [
  z.strictObject({ kind: z.literal("local") }),
  z.strictObject({
    kind: z.literal("mpirun"),
    /** The mpirun to run (mpirun, mpiexec.mpich, a full path). */
    command: line().min(1).default("mpirun"),
    /** Relative to the experiment file. */
    hostfile: line().min(1).optional(),
    args: z.array(line()).default([]),
  }),
  z.strictObject({
    kind: z.literal("slurm"),
    mode: z.enum(["pack", "array"]).default("pack"),
    /** Array mode with `concurrent`: at most this many array tasks at once (`%throttle`); otherwise one. */
    throttle: z.int().min(1).default(4),
    /** Chains the campaign's batch jobs with afterany even where `concurrent` lets repetitions share nodes. */
    serialize: z.boolean().default(false),
    /**
     * Lets repetitions share nodes and run at the same time (no --exclusive, jobs not chained, arrays by
     * throttle): by default each runs alone, since repetitions that run together measure each other.
     */
    concurrent: z.boolean().default(false),
    partition: line().min(1).optional(),
    /** The batch job's time limit, as sbatch --time takes it. */
    time: line().min(1).default("00:30:00"),
    /** More sbatch options, one per item (["--account=x"]). */
    sbatch: z.array(line()).default([]),
  }),
]);

export const experimentSchema = z.strictObject({
  $schema: z.string().optional(),
  name: name("campaign"),
  /** Job files, relative to the experiment file. */
  jobs: z.array(line().min(1)).min(1),
  matrix: matrixSchema,
  /** Axes that advance together instead of crossing: [["world_size", "hosts"]]. */
  zip: z.array(z.array(z.enum(MATRIX_AXES)).min(2)).default([]),
  /** Points to leave out: every key given must match. */
  exclude: z.array(z.strictObject({
    job: z.string().optional(),
    backend: backend.optional(),
    world_size: z.int().optional(),
    hosts: z.int().optional(),
    variant: z.string().optional(),
  })).default([]),
  repetitions: z.int().min(1).default(1),
  order: z.enum(["interleaved", "randomized", "blocked"]).default("interleaved"),
  /** The randomized order's seed: the same seed, the same order. */
  seed: z.int().min(0).default(0),
  executor: executorSchema.default({ kind: "local" }),
  /** Metrics of a row (busbw, algbw, time.p50_us, rel_error, ...) and which way is better. */
  metrics: z.record(z.string(), z.enum(["higher", "lower"])).default({ busbw: "higher", "time.avg_us": "lower" }),
  compare: z.strictObject({
    /** A campaign directory to compare against, relative to the experiment file. */
    baseline: z.string().min(1).optional(),
    /** Per metric: a change smaller than this is no change. */
    tolerance: z.record(z.string(), percent).default({}),
  }).default({ tolerance: {} }),
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
