import { applyParams, sweepPoints } from "./sweep.js";
import { ConfigError, formatJsonPath, quoteList } from "../config/errors.js";
import { stageHasReduce, stageInputs, type DType, type Job, type Stage } from "../config/job.js";
import { topologicalOrder } from "./schedule.js";

const INTEGER_DTYPES: ReadonlySet<DType> = new Set(["int32", "int64"]);

type Fail = (path: PropertyKey[], message: string) => never;
type QuantizedStage = Extract<Stage, { op: "quantized_allreduce" }>;

function known(what: string, names: readonly string[]): string {
  return names.length === 0 ? `the job declares no ${what}` : `${what}: ${quoteList(names)}`;
}

function checkInputs(job: Job, stage: Stage, fail: Fail): void {
  const names = stageInputs(stage);
  const field = (k: number) => ("inputs" in stage && stage.inputs ? ["inputs", k] : ["input"]);
  names.forEach((name, k) => {
    if (!Object.hasOwn(job.tensors, name)) {
      fail(field(k), `unknown tensor ${JSON.stringify(name)} (${known("tensors", Object.keys(job.tensors))})`);
    }
  });
  // A coalesced collective is one flat buffer, so every piece must have the first one's dtype.
  const [first, ...rest] = names;
  rest.forEach((name, k) => {
    const [a, b] = [job.tensors[first].dtype, job.tensors[name].dtype];
    if (a !== b) fail(field(k + 1), `coalesced tensors must share a dtype: "${first}" is ${a} but "${name}" is ${b}`);
  });
  // 1-bit compression scales signs by a norm, quantization values by a step: neither means much for integers.
  if ((stage.op === "compressed_allreduce" || stage.op === "quantized_allreduce") && INTEGER_DTYPES.has(job.tensors[stage.input].dtype)) {
    fail(["input"], `${stage.op} needs a floating-point tensor but "${stage.input}" is ${job.tensors[stage.input].dtype}`);
  }
  if (stageHasReduce(stage) && stage.reduce === "mean") {
    const integer = names.find((name) => INTEGER_DTYPES.has(job.tensors[name].dtype));
    if (integer !== undefined) {
      fail(["reduce"], `"mean" needs a floating-point dtype but tensor "${integer}" is ${job.tensors[integer].dtype}`);
    }
  }
}

/** A stage's own layout of nodes × local ranks must tile the world (without one, the hosts decide: quantized-allreduce.ts). */
function checkLayout(stage: QuantizedStage, worldSize: number, fail: Fail): void {
  const { nodes, localSize } = stage;
  if (nodes !== undefined && localSize !== undefined) {
    if (nodes * localSize !== worldSize) {
      fail(["nodes"], `nodes × localSize = ${nodes} × ${localSize} = ${nodes * localSize} must equal the world size ${worldSize}`);
    }
  } else if (nodes !== undefined || localSize !== undefined) {
    const [field, value] = nodes !== undefined ? ["nodes", nodes] : ["localSize", localSize!];
    if (worldSize % value !== 0) fail([field], `${field} ${value} does not divide the world size ${worldSize}`);
  }
}

function checkStage(
  job: Job, stage: Stage, stageIds: ReadonlyMap<string, number>, worldSize: number | undefined, fail: Fail,
): void {
  checkInputs(job, stage, fail);
  if (stage.op === "quantized_allreduce" && worldSize !== undefined) checkLayout(stage, worldSize, fail);
  (stage.after ?? []).forEach((id, k) => {
    if (id === stage.id) fail(["after", k], `stage "${id}" cannot run after itself`);
    if (!stageIds.has(id)) fail(["after", k], `unknown stage ${JSON.stringify(id)} (${known("stages", [...stageIds.keys()])})`);
  });
  if ("root" in stage && worldSize !== undefined && stage.root >= worldSize) {
    fail(["root"], `root ${stage.root} is out of range for ${worldSize} ranks (expected 0..${worldSize - 1})`);
  }
  if (stage.op === "send_recv" && !Number.isSafeInteger(stage.shift)) {
    fail(["shift"], `expected a safe integer, got ${stage.shift}`);
  }
}

/** Follows `after` links among the stages left unscheduled until one repeats: that loop is a cycle. */
function findCycle(stages: readonly Stage[], stageIds: ReadonlyMap<string, number>, scheduled: ReadonlySet<number>): number[] {
  const path: number[] = [];
  const seenAt = new Map<number, number>();
  let i = stages.findIndex((_, k) => !scheduled.has(k));
  while (!seenAt.has(i)) {
    seenAt.set(i, path.length);
    path.push(i);
    // Every unscheduled stage waits on at least one other unscheduled stage.
    i = (stages[i].after ?? []).map((id) => stageIds.get(id)!).find((k) => !scheduled.has(k))!;
  }
  const cycle = path.slice(seenAt.get(i));
  const start = cycle.indexOf(Math.min(...cycle));
  return [...cycle.slice(start), ...cycle.slice(0, start)];
}

/**
 * The checks a schema cannot express: names that must resolve, a DAG without cycles,
 * dtype/reduction compatibility, and (when the world size is known) roots in range and node layouts that
 * tile the world.
 * Throws a ConfigError for the first problem, in declaration order.
 */
export function validateGraph(job: Job, file: string, worldSize?: number): void {
  const failAt =
    (i: number): Fail =>
    (path, message) => {
      throw new ConfigError(file, formatJsonPath(["stages", i, ...path]), message);
    };
  const stageIds = new Map<string, number>();
  job.stages.forEach((stage, i) => {
    const first = stageIds.get(stage.id);
    if (first !== undefined) failAt(i)(["id"], `duplicate stage id "${stage.id}" (also stages[${first}])`);
    stageIds.set(stage.id, i);
  });
  job.stages.forEach((stage, i) => checkStage(job, stage, stageIds, worldSize, failAt(i)));

  const order = topologicalOrder(job.stages);
  if (order.length < job.stages.length) {
    const cycle = findCycle(job.stages, stageIds, new Set(order));
    const ids = [...cycle, cycle[0]].map((i) => job.stages[i].id);
    failAt(cycle[0])(["after"], `cycle ${ids.join(" -> ")}`);
  }

  if (job.sweep?.count && Object.keys(job.tensors).length === 0) {
    throw new ConfigError(file, "sweep", "nothing to sweep: the job declares no tensors");
  }
  for (const point of sweepPoints(job)) {
    const { job: at } = applyParams(job, point.params, file);
    // What a point sets (a root, a node layout) must hold there too.
    if (Object.keys(point.params).length > 0) at.stages.forEach((stage, i) => checkStage(at, stage, stageIds, worldSize, failAt(i)));
  }
}

// MPI takes element counts as C ints (native/src/backends/mpi/mpi_api.cc, count()).
const MPI_MAX_COUNT = 2 ** 31 - 1;

/** The elements one MPI call of the stage names: the tensor's, or the coalesced collective's padded whole. */
function mpiCount(stage: Stage, count: (tensor: string) => number, worldSize: number): number {
  const names = stageInputs(stage);
  if (stage.op === "reduce_scatter" && stage.coalesced) return names.reduce((sum, t) => sum + Math.ceil(count(t) / worldSize) * worldSize, 0);
  return names.length ? count(names[0]) : 0;
}

/**
 * What the backend cannot run, checked with the configured backend before the ranks meet and again with
 * the one "auto" chose, so that every rank stops at the same point with the same message:
 * - "shared" reduces and copies out of the shm backend's segment, so any other backend refuses it;
 * - MPI's int counts: a stage (at any sweep point) whose tensor has more elements than a C int holds.
 */
export function validateBackend(job: Job, file: string, backend: string, worldSize = 1): void {
  job.stages.forEach((stage, i) => {
    if (backend !== "shm" && backend !== "auto" && "algorithm" in stage && stage.algorithm === "shared") {
      throw new ConfigError(file, formatJsonPath(["stages", i, "algorithm"]), `"shared" needs the shm backend (every rank on one host), not ${backend}`);
    }
  });
  if (backend !== "mpi") return;
  for (const point of sweepPoints(job)) {
    const count = (t: string) => point.count ?? job.tensors[t].count;
    job.stages.forEach((stage, i) => {
      const n = mpiCount(stage, count, worldSize);
      if (n > MPI_MAX_COUNT) {
        const at = point.count === undefined ? "" : ` at sweep count ${point.count}`;
        throw new ConfigError(file, formatJsonPath(["stages", i]), `stage "${stage.id}" moves ${n} elements in one MPI call${at}, more than MPI's int count allows (${MPI_MAX_COUNT}); use a smaller tensor or another backend`);
      }
    });
  }
}
