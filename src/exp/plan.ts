// An experiment expanded into points (one job at one matrix combination), each validated at its own world
// size and backend before anything runs, with an id that changes whenever what it would measure changes.
import { createHash } from "node:crypto";
import { ConfigError } from "../config/errors.js";
import type { Job } from "../config/job.js";
import { parseJob } from "../config/load.js";
import { readInputText } from "../config/read-input.js";
import { validateBackend, validateGraph } from "../graph/validate.js";
import { VERSION } from "../version.js";
import { cannotStart, describeExecutor, hostfileHosts, type Available } from "./executors.js";
import type { Axis, LoadedExperiment } from "./file.js";
import { slurmNodes } from "./slurm.js";

/** A point's coordinates: the job's name and one value of each matrix axis. */
export interface Params {
  job: string;
  backend: string;
  world_size: number;
  hosts: number;
  variant: string;
  /** The executor and what of it shapes the run (file.ts, describeExecutor): "local", "mpirun mpirun --hostfile h". */
  executor: string;
}

export interface Point {
  /** A hash of the job as run, the parameters, the environment and the runner's version. */
  id: string;
  /** The same coordinates in another run of the campaign: a point whose id changed at the same slot is stale. */
  slot: string;
  params: Params;
  jobPath: string;
  /** The job with the variant's overrides applied, as the ranks read it. */
  job: Job;
  jobText: string;
  env: Record<string, string>;
}

export interface Plan {
  points: Point[];
  excluded: Params[];
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** `overrides` merged into `base`: objects key by key, anything else replaced. */
export function mergeOverrides(base: unknown, overrides: unknown): unknown {
  if (!isObject(base) || !isObject(overrides)) return overrides;
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(overrides)) out[k] = mergeOverrides(base[k], v);
  return out;
}

export const describeParams = (p: Params): string =>
  `job=${p.job} backend=${p.backend} world_size=${p.world_size} hosts=${p.hosts} variant=${p.variant} executor=${JSON.stringify(p.executor)}`;

/** The executor is not part of the slot: a point moved to another executor is stale, and reruns. */
export const slotOf = (p: Params): string => JSON.stringify([p.job, p.backend, p.world_size, p.hosts, p.variant]);

type Coordinates = Omit<Params, "job" | "executor">;

/** Every combination of the matrix: zipped axes advance together, the others cross. */
function combinations(exp: LoadedExperiment): Coordinates[] {
  const values: Record<Exclude<Axis, "job">, unknown[]> = {
    backend: exp.matrix.backend, world_size: exp.matrix.world_size, hosts: exp.matrix.hosts, variant: Object.keys(exp.matrix.variant),
  };
  const zipped = new Set<string>();
  const units: Record<string, unknown>[][] = exp.zip.map((axes, i) => {
    for (const a of axes) {
      if (zipped.has(a)) throw new ConfigError(exp.file, `zip[${i}]`, `${a} is already zipped with other axes`);
      zipped.add(a);
    }
    const length = values[axes[0]!].length;
    const odd = axes.find((a) => values[a].length !== length);
    if (odd) throw new ConfigError(exp.file, `zip[${i}]`, `zipped axes need as many values each: ${axes[0]} has ${length}, ${odd} ${values[odd].length}`);
    return Array.from({ length }, (_, k) => Object.fromEntries(axes.map((a) => [a, values[a][k]])));
  });
  for (const a of Object.keys(values) as (keyof typeof values)[]) if (!zipped.has(a)) units.push(values[a].map((v) => ({ [a]: v })));
  return units.reduce<Record<string, unknown>[]>((acc, unit) => acc.flatMap((c) => unit.map((u) => ({ ...c, ...u }))), [{}]) as unknown as Coordinates[];
}

function readJob(file: string): { name: string; data: unknown } {
  const text = readInputText(file);
  const job = parseJob(text, file);
  return { name: job.name, data: JSON.parse(text.replace(/^\uFEFF/, "")) };
}

/** The point's job, overrides applied, checked at its world size and backend; bad input names the point. */
function pointJob(exp: LoadedExperiment, jobPath: string, data: unknown, params: Params): { job: Job; jobText: string } {
  const overrides = exp.matrix.variant[params.variant]!.overrides;
  const jobText = JSON.stringify(mergeOverrides(data, overrides), null, 2) + "\n";
  try {
    if (params.hosts > params.world_size) throw new Error(`${params.hosts} hosts for ${params.world_size} ranks`);
    const job = parseJob(jobText, jobPath);
    validateGraph(job, jobPath, params.world_size);
    validateBackend(job, jobPath, params.backend, params.world_size);
    return { job, jobText };
  } catch (err) {
    throw new ConfigError(exp.file, "", `point ${describeParams(params)}: ${(err as Error).message}`);
  }
}

/** The hostfile's text is part of the id too: the same path naming other hosts measures something else. */
function pointId(jobText: string, params: Params, env: Record<string, string>, hostfile: string | undefined): string {
  return createHash("sha256").update(JSON.stringify({ job: JSON.parse(jobText), params, env, hostfile, version: VERSION })).digest("hex").slice(0, 12);
}

/** The mpirun executor's hostfile, resolved against the experiment's folder, and its text. */
function readHostfile(exp: LoadedExperiment): { text: string; hosts: string[] } | undefined {
  if (exp.executor.kind !== "mpirun" || !exp.executor.hostfile) return undefined;
  const file = exp.executor.hostfile;
  let text: string;
  try {
    text = readInputText(file);
  } catch (err) {
    throw new ConfigError(exp.file, "executor.hostfile", (err as Error).message);
  }
  return { text, hosts: hostfileHosts(text) };
}

/**
 * The hosts the executor can give, where they can be known: the hostfile's, or the nodes sinfo lists for the
 * SLURM executor. Without an answer from sinfo, plan says in one line that hosts go unchecked (sbatch refuses
 * an allocation the cluster cannot give when the job is submitted).
 */
function availableHosts(exp: LoadedExperiment, hostfile: string[] | undefined): Available | undefined {
  if (hostfile) return { names: hostfile, count: (n) => `the hostfile names ${n}` };
  if (exp.executor.kind !== "slurm") return undefined;
  const where = exp.executor.partition ? `partition ${exp.executor.partition}` : "the cluster";
  const answer = slurmNodes(exp.executor);
  if ("nodes" in answer) return { names: answer.nodes, count: (n) => `${where} has ${n} node${n === 1 ? "" : "s"} (sinfo)` };
  process.stderr.write(`exp: sinfo did not answer (${answer.why}): the points' hosts are not checked against ${where}\n`);
  return undefined;
}

/** Refuses, in one line naming every such point, points the executor cannot start. */
function checkStartable(exp: LoadedExperiment, all: Params[], hosts: Available | undefined): void {
  const refused = all.flatMap((p) => {
    const why = cannotStart(exp.executor, p, hosts);
    return why ? [`${describeParams(p)} (${why})`] : [];
  });
  if (refused.length) throw new ConfigError(exp.file, "executor", `${refused.length} point${refused.length === 1 ? "" : "s"} cannot run: ${refused.join("; ")}`);
}

const matches = (rule: Partial<Params>, p: Params) => Object.entries(rule).every(([k, v]) => p[k as keyof Params] === v);

/** Every point of the experiment, validated; exclusions that match nothing, or leave nothing, are bad input. */
export function planExperiment(exp: LoadedExperiment): Plan {
  const jobs = exp.jobPaths.map(readJob);
  jobs.forEach((j, i) => {
    if (jobs.findIndex((o) => o.name === j.name) !== i) throw new ConfigError(exp.file, `jobs[${i}]`, `another job is also named "${j.name}"`);
  });
  const executor = describeExecutor(exp.executor);
  const all = jobs.flatMap((j, i) => combinations(exp).map((c) => ({ params: { job: j.name, ...c, executor } as Params, jobPath: exp.jobPaths[i]!, data: j.data })));
  exp.exclude.forEach((rule, i) => {
    if (!all.some((p) => matches(rule, p.params))) throw new ConfigError(exp.file, `exclude[${i}]`, "matches no point");
  });
  const kept = all.filter((p) => !exp.exclude.some((rule) => matches(rule, p.params)));
  if (!kept.length) throw new ConfigError(exp.file, "exclude", "every point is excluded: nothing to run");
  const hostfile = readHostfile(exp);
  checkStartable(exp, kept.map((p) => p.params), availableHosts(exp, hostfile?.hosts));
  const points = kept.map(({ params, jobPath, data }) => {
    const { job, jobText } = pointJob(exp, jobPath, data, params);
    const env = exp.matrix.variant[params.variant]!.env;
    return { id: pointId(jobText, params, env, hostfile?.text), slot: slotOf(params), params, jobPath, job, jobText, env };
  });
  return { points, excluded: all.filter((p) => !kept.includes(p)).map((p) => p.params) };
}

/** One repetition of one point. */
export interface Task {
  point: Point;
  /** 1-based. */
  rep: number;
}

/**
 * The order repetitions run in. interleaved: every point once, then again (drift hits all points alike);
 * blocked: a point's repetitions back to back; randomized: a shuffle that the seed fixes.
 */
export function taskOrder(exp: Pick<LoadedExperiment, "order" | "seed" | "repetitions">, points: Point[]): Task[] {
  const reps = Array.from({ length: exp.repetitions }, (_, k) => k + 1);
  if (exp.order === "blocked") return points.flatMap((point) => reps.map((rep) => ({ point, rep })));
  const interleaved = reps.flatMap((rep) => points.map((point) => ({ point, rep })));
  if (exp.order === "interleaved") return interleaved;
  const key = (t: Task) => createHash("sha256").update(`${exp.seed} ${t.point.id} ${t.rep}`).digest("hex");
  return interleaved.map((t) => [key(t), t] as const).sort((a, b) => (a[0] < b[0] ? -1 : 1)).map(([, t]) => t);
}
