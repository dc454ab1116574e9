import { applyParams, sweepPoints } from "./sweep.js";
import { ConfigError, formatJsonPath, plural, quoteList } from "../config/errors.js";
import { stageHasReduce, stageInputs, type DType, type Job, type Stage, type StageOp } from "../config/job.js";
import { describeGroups, hostsOf, MAX_STREAMS, resolveGroups, streamLanes, streamOf } from "./groups.js";
import { topologicalOrder } from "./schedule.js";
import { countMatrices, largestReceive, largestSend, rowSums } from "../stages/all-to-allv.js";

const INTEGER_DTYPES: ReadonlySet<DType> = new Set(["int32", "int64"]);

type Fail = (path: PropertyKey[], message: string) => never;
type Groups = ReadonlyMap<string, number[][]>;

/** Ops with nccl-tests' in-place form: the output buffer is the input buffer (or the rank's slice of it). */
export const IN_PLACE_OPS: ReadonlySet<StageOp> = new Set(["allreduce", "reduce_scatter", "all_gather", "broadcast", "all_to_all", "reduce"]);
// Ops that move no data run in groups of any sizes; the others report one row, so one group size.
const SIZELESS_OPS: ReadonlySet<StageOp> = new Set(["barrier", "compute"]);
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

/** Group, stream and inPlace: names that must resolve and options the op must have. */
function checkGraphFields(job: Job, stage: Stage, fail: Fail): void {
  if (stage.group !== undefined && !Object.hasOwn(job.groups ?? {}, stage.group)) {
    fail(["group"], `unknown group ${JSON.stringify(stage.group)} (${known("groups", Object.keys(job.groups ?? {}))})`);
  }
  if (stage.group !== undefined && (stage.op === "compressed_allreduce" || stage.op === "quantized_allreduce")) {
    fail(["group"], `${stage.op} runs over the whole world: "group" is for the exact collectives`);
  }
  if (stage.stream !== undefined && job.streams && stage.stream !== "main" && !job.streams.includes(stage.stream)) {
    fail(["stream"], `unknown stream ${JSON.stringify(stage.stream)} (${known("streams", ["main", ...job.streams])})`);
  }
  if (stage.inPlace && (!IN_PLACE_OPS.has(stage.op) || ("coalesced" in stage && stage.coalesced))) {
    const what = stage.op === "reduce_scatter" ? "a coalesced reduce_scatter" : stage.op;
    fail(["inPlace"], `${what} has no in-place form (in place: ${[...IN_PLACE_OPS].join(", ")})`);
  }
}

/**
 * all_to_allv's matrices: one for every group (or one for all), each as many rows as a group has ranks, and
 * a tensor (at every sweep count) that holds the largest row: a rank sends the first elements of it.
 */
function checkCounts(job: Job, stage: Extract<Stage, { op: "all_to_allv" }>, groups: number, size: number, fail: Fail): void {
  const list = Array.isArray(stage.counts[0]?.[0]);
  const matrices = countMatrices(stage.counts, groups);
  if (matrices.length !== groups) {
    fail(["counts"], `${matrices.length} count matrices for the ${groups} groups of "${stage.group}" (give one per group, or one for all)`);
  }
  matrices.forEach((m, g) => {
    const where = stage.group === undefined ? `the ${size} ranks` : `the groups of "${stage.group}" (${size} ranks each)`;
    if (m.length !== size) fail(list ? ["counts", g] : ["counts"], `a ${m.length}×${m.length} matrix for ${where}: expected ${size}×${size}`);
  });
  if (!(stage.input in job.tensors)) return;
  const count = Math.min(...sweepPoints(job).map((p) => p.count ?? job.tensors[stage.input]!.count));
  matrices.forEach((m, g) => rowSums(m).forEach((send, i) => {
    if (send <= count) return;
    const at = job.sweep?.count ? " at its smallest sweep count" : "";
    fail(list ? ["counts", g, i] : ["counts", i], `rank ${i} sends ${send} elements, more than the ${count} of "${stage.input}"${at}`);
  }));
}

/** A stage in a group: one group size for its row, a root inside every group, in-place blocks that fit. */
function checkRoot(job: Job, stage: Stage, worldSize: number, groups: Groups, fail: Fail): void {
  if (stage.group !== undefined && !groups.has(stage.group)) return;  // a split not known yet
  const parts = stage.group === undefined ? undefined : groups.get(stage.group)!;
  const sizes = new Set(parts?.map((g) => g.length) ?? [worldSize]);
  if (sizes.size > 1 && !SIZELESS_OPS.has(stage.op)) {
    fail(["group"], `group "${stage.group}" has ${describeGroups(parts!)}: ${stage.op} needs groups of one size (its row reports one group size)`);
  }
  const size = Math.min(...sizes);
  // nccl-tests' in-place all_to_all sends and receives blocks of one size in the one buffer.
  if (stage.op === "all_to_all" && stage.inPlace && stage.input in job.tensors && job.tensors[stage.input]!.count % size !== 0) {
    fail(["inPlace"], `in place, all_to_all needs a count divisible by its ${size} ranks, but "${stage.input}" has ${job.tensors[stage.input]!.count}`);
  }
  if (stage.op === "all_to_allv") checkCounts(job, stage, parts?.length ?? 1, size, fail);
  if ("root" in stage && stage.root >= size) {
    const where = parts ? `outside the groups of "${stage.group}" (${describeGroups(parts)})` : `out of range for ${plural(worldSize, "rank")}`;
    fail(["root"], `root ${stage.root} is ${where} (expected ${size > 1 ? `0..${size - 1}` : "0"})`);
  }
}

function checkStage(
  job: Job, stage: Stage, stageIds: ReadonlyMap<string, number>, worldSize: number | undefined, groups: Groups, fail: Fail,
): void {
  checkInputs(job, stage, fail);
  checkGraphFields(job, stage, fail);
  if (stage.op === "quantized_allreduce" && worldSize !== undefined) checkLayout(stage, worldSize, fail);
  (stage.after ?? []).forEach((id, k) => {
    if (id === stage.id) fail(["after", k], `stage "${id}" cannot run after itself`);
    if (!stageIds.has(id)) fail(["after", k], `unknown stage ${JSON.stringify(id)} (${known("stages", [...stageIds.keys()])})`);
  });
  if (worldSize !== undefined) checkRoot(job, stage, worldSize, groups, fail);
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
 * Every declared group as a partition of the world (none without a world size); the first that is not one
 * fails. `split` groups wait for the hosts (topology null) where ranks could disagree on them: before they
 * meet, each knows only its own host's local size.
 */
function resolveAll(job: Job, file: string, worldSize: number | undefined, hostOf: readonly number[] | undefined): Groups {
  if (worldSize === undefined) return new Map();
  const hosts = hostOf && hostsOf(hostOf);
  const known = Object.entries(job.groups ?? {}).filter(([, spec]) => hosts || !("split" in spec));
  return new Map(known.map(([name, spec]) => {
    const groups = resolveGroups(spec, worldSize, hosts ?? []);
    if (typeof groups === "string") throw new ConfigError(file, formatJsonPath(["groups", name]), `not a partition of the ranks: ${groups}`);
    return [name, groups];
  }));
}

/** More streams than the backends have lanes: named at the first stage of the first stream too many. */
function checkStreams(job: Job, order: readonly number[], failAt: (i: number) => Fail): void {
  const lanes = streamLanes(order.map((i) => job.stages[i]!));
  if (lanes.size <= MAX_STREAMS) return;
  const extra = [...lanes.keys()][MAX_STREAMS]!;
  const i = job.stages.findIndex((s) => streamOf(s) === extra);
  failAt(i)(["stream"], `stream "${extra}" is one too many: a job runs at most ${MAX_STREAMS} streams (${[...lanes.keys()].slice(0, MAX_STREAMS).join(", ")})`);
}

/** A job that records its world size (an imported trace's) runs at that size only. */
export function checkWorldSize(job: Job, file: string, worldSize: number | undefined): void {
  if (worldSize !== undefined && job.worldSize !== undefined && worldSize !== job.worldSize) {
    const why = job.source ? " (the trace's world size; `runner trace import --world N` rescales where that is well defined)" : "";
    throw new ConfigError(file, "worldSize", `the job runs at ${job.worldSize} ranks only, not ${worldSize}${why}`);
  }
}

/**
 * The checks a schema cannot express: names that must resolve, a DAG without cycles,
 * dtype/reduction compatibility, and (when the world size is known) groups that partition the world, roots
 * in range and node layouts that tile the world. `hostOf` (each rank's host, once the ranks have met)
 * resolves `split` groups; without it they are left for the check after the ranks meet.
 * Throws a ConfigError for the first problem, in declaration order.
 */
export function validateGraph(job: Job, file: string, worldSize?: number, hostOf?: readonly number[]): void {
  const failAt =
    (i: number): Fail =>
    (path, message) => {
      throw new ConfigError(file, formatJsonPath(["stages", i, ...path]), message);
    };
  checkWorldSize(job, file, worldSize);
  const stageIds = new Map<string, number>();
  job.stages.forEach((stage, i) => {
    const first = stageIds.get(stage.id);
    if (first !== undefined) failAt(i)(["id"], `duplicate stage id "${stage.id}" (also stages[${first}])`);
    stageIds.set(stage.id, i);
  });
  const groups = resolveAll(job, file, worldSize, hostOf);
  job.stages.forEach((stage, i) => checkStage(job, stage, stageIds, worldSize, groups, failAt(i)));

  const order = topologicalOrder(job.stages);
  if (order.length < job.stages.length) {
    const cycle = findCycle(job.stages, stageIds, new Set(order));
    const ids = [...cycle, cycle[0]].map((i) => job.stages[i].id);
    const streams = [...new Set(cycle.map((i) => streamOf(job.stages[i])))];
    failAt(cycle[0])(["after"], `cycle ${ids.join(" -> ")}${streams.length > 1 ? ` (across streams ${streams.join(", ")})` : ""}`);
  }
  checkStreams(job, order, failAt);

  if (job.sweep?.count && Object.keys(job.tensors).length === 0) {
    throw new ConfigError(file, "sweep", "nothing to sweep: the job declares no tensors");
  }
  for (const point of sweepPoints(job)) {
    const { job: at } = applyParams(job, point.params, file);
    // What a point sets (a root, a node layout) must hold there too.
    if (Object.keys(point.params).length > 0) at.stages.forEach((stage, i) => checkStage(at, stage, stageIds, worldSize, groups, failAt(i)));
  }
}

/**
 * nccl joins a communicator per lane, so it runs every stream; hccl runs one lane (so no stream but "main",
 * igather aside, which completes where it is posted) and makes no sub-communicators (HcclCreateSubCommConfig
 * is not wired).
 */
function checkLibraryGraph(stage: Stage, backend: string, fail: (field: string, message: string) => never): void {
  if (backend === "hccl" && stage.op !== "igather" && streamOf(stage) !== "main") {
    fail("stream", `backend ${backend} runs one lane, so no stream but "main" (igather aside)`);
  }
  if (backend === "hccl" && stage.group !== undefined) fail("group", "backend hccl makes no sub-communicators, so no groups");
}

// MPI takes element counts as C ints (native/src/backends/mpi/mpi_api.cc, count()).
const MPI_MAX_COUNT = 2 ** 31 - 1;

/** The elements one MPI call of the stage names: the tensor's, or the coalesced collective's padded whole. */
function mpiCount(stage: Stage, count: (tensor: string) => number, worldSize: number): number {
  const names = stageInputs(stage);
  if (stage.op === "reduce_scatter" && stage.coalesced) return names.reduce((sum, t) => sum + Math.ceil(count(t) / worldSize) * worldSize, 0);
  // MPI_Alltoallv's displacements are ints too: a rank's whole send and receive buffers must fit.
  if (stage.op === "all_to_allv") return Math.max(largestSend(stage.counts), largestReceive(stage.counts));
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
    checkLibraryGraph(stage, backend, (field, message) => {
      throw new ConfigError(file, formatJsonPath(["stages", i, field]), `stage "${stage.id}": ${message}`);
    });
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
