// What one rank of a job holds in memory at its largest sweep point, worked out from the native program
// before any communication, so a job that cannot fit is refused with numbers instead of failing in an
// allocation after the ranks have met. The sizes mirror native/src/runtime/executor.cc (prepare) and the
// estimating ops; they are the root's, the rank that holds the most.
import type { NativeOp, NativeProgram } from "../comm/native.js";
import { deviceMemory } from "../comm/vendor-library.js";
import { ConfigError } from "../config/errors.js";
import { ELEMENT_BYTES, type Job } from "../config/job.js";
import { formatSize } from "../config/size.js";
import { availableMemory } from "../env/memory.js";
import type { Place } from "../env/place.js";
import type { World } from "../plan.js";
import { largestReceive } from "../stages/all-to-allv.js";
import { plan, worldGroups } from "./plan.js";
import { sweepPoints } from "./sweep.js";

/** One allocation of the plan: what it is for, and where it comes from. */
export interface MemoryItem {
  readonly what: string;
  readonly stage?: string;
  readonly tensor: string;
  readonly bytes: number;
}

export interface MemoryPlan {
  readonly items: readonly MemoryItem[];
  /** Bytes of host memory one rank needs. */
  readonly total: number;
  /** The sweep count of the largest point, when the job sweeps counts. */
  readonly count?: number;
}

const block = (count: number, w: number) => Math.ceil(count / w);

/** The output's elements on the root (mirrors Executor::prepare). */
function outputCount(op: NativeOp, count: number, w: number, counts: readonly number[]): number {
  switch (op.kind) {
    case "allreduce": case "send_recv": case "broadcast": case "reduce": return count;
    case "all_gather": case "gather": return w * count;
    case "scatter": return block(count, w);
    case "all_to_all": return w * block(count, w);
    case "all_to_allv": return largestReceive(op.counts);
    case "reduce_scatter": return op.inputs.reduce((n, i) => n + block(counts[i]!, w), 0);
    case "barrier": case "compute": return 0;
  }
}

/** The buffers an op holds beyond its output: coalesced flat buffers, reductions' scratch, estimators' state. */
function workspaces(op: NativeOp, count: number, es: number, w: number, counts: readonly number[]): [string, number][] {
  const items: [string, number][] = [];
  if (op.kind === "reduce_scatter" && op.coalesced) {
    const padded = op.inputs.reduce((n, i) => n + block(counts[i]!, w), 0);
    items.push(["coalesced buffers", padded * (w + 1) * es]);
  }
  if ((op.kind === "allreduce" || op.kind === "reduce_scatter") && op.compression) {
    items.push(["error-feedback buffers", (count + block(count, w)) * 4]);
    // The exact result and the running sum of the estimates (float64), which the error is measured against.
    items.push(["error reference", count * 8 * 2]);
  } else if (op.kind === "allreduce" || op.kind === "reduce" || op.kind === "reduce_scatter") {
    // Reductions receive a peer's chunk before adding it in; 16-bit types widen to float32 first.
    items.push(["reduction workspace", count * (es < 4 ? 4 * 2 : es)]);
  }
  return items;
}

const DUMP = "dump";

/** Bytes of .npy files one rank writes, as the plan counts them. */
export const dumpBytes = (p: MemoryPlan) => p.items.reduce((n, i) => n + (i.what === DUMP ? i.bytes : 0), 0);

/** Every allocation of one sweep point's program; `dumps`: each output and its inputs also go to .npy files. */
function programItems(program: NativeProgram, w: number, dumps: boolean): MemoryItem[] {
  const counts = program.tensors.map((t) => t.count);
  const items: MemoryItem[] = program.tensors.map((t) => ({ what: "tensor", tensor: t.name, bytes: t.count * ELEMENT_BYTES[t.dtype] }));
  for (const op of program.ops) {
    const t = program.tensors[op.inputs[0] ?? -1];
    if (!t) continue;
    const es = ELEMENT_BYTES[t.dtype];
    const out = outputCount(op, t.count, w, counts) * es;
    items.push({ what: "output", stage: op.stage, tensor: t.name, bytes: out });
    // A dump copies the output and the inputs into .npy files (and as much onto the disk).
    const inputs = op.inputs.reduce((n, i) => n + program.tensors[i]!.count * es, 0);
    if (dumps) items.push({ what: DUMP, stage: op.stage, tensor: t.name, bytes: out + inputs });
    for (const [what, bytes] of workspaces(op, t.count, es, w, counts)) items.push({ what, stage: op.stage, tensor: t.name, bytes });
  }
  return items;
}

/** The plan of the job's largest sweep point for `world.size` ranks. */
export function memoryPlan(job: Job, world: World, dumps: boolean): MemoryPlan {
  let largest: MemoryPlan = { items: [], total: 0 };
  const groups = worldGroups(job, world);
  for (const point of sweepPoints(job)) {
    const { program } = plan(job, world, point, groups);
    const items = programItems(program, world.size, dumps);
    const total = items.reduce((n, i) => n + i.bytes, 0);
    if (total > largest.total) largest = { items, total, ...(point.count !== undefined && { count: point.count }) };
  }
  return largest;
}

const bytes = (n: number) => `${formatSize(n)} (${n} bytes)`;

/** "stage "ar" output of tensor "x"", or "tensor "x"" for the tensor itself. */
function describeItem(i: MemoryItem): string {
  return i.stage ? `stage "${i.stage}" ${i.what} of tensor "${i.tensor}"` : `tensor "${i.tensor}"`;
}

/**
 * Refuses, in one line with the numbers, a job whose ranks on this host (`world.localSize` of them, sharing
 * its memory and usually its cgroup) need more than `available` bytes; returns the plan otherwise.
 */
function checkMemory(job: Job, file: string, world: { size: number; localSize: number }, dumps: boolean, available?: Available): MemoryPlan {
  // Before the ranks meet the hosts are not known: as the launcher says, `localSize` ranks a host.
  const hostOf = Array.from({ length: world.size }, (_, r) => Math.floor(r / world.localSize));
  const p = memoryPlan(job, { size: world.size, hostOf }, dumps);
  const needed = p.total * world.localSize;
  if (!available || needed <= available.bytes) return p;
  refuse(p.items, p, file, world.localSize > 1 ? `${world.localSize} ranks on this host need ${bytes(needed)}, ${formatSize(p.total)} each` : `a rank needs ${bytes(needed)}`, available);
}

/**
 * The device bytes of a job on a device: its plan less the dumps, which stay on the host. Refuses, in one line
 * with the numbers, a plan that does not fit the rank's own device (`device`, e.g. "cuda:1": each rank of a
 * node has one) where its runtime says what is `available`.
 */
function checkDeviceMemory(p: MemoryPlan, file: string, device: string, available?: Available): number {
  const items = p.items.filter((i) => i.what !== DUMP);
  const needed = items.reduce((n, i) => n + i.bytes, 0);
  if (available && needed > available.bytes) refuse(items, p, file, `a rank needs ${bytes(needed)} on device ${device}`, available);
  return needed;
}

type Available = { bytes: number; source: string };

/** The command line (`dumpDir`) or a stage asks for .npy dumps (each output then also copied out). */
const wantsDumps = (job: Job, dumpDir?: string) => !!dumpDir || job.stages.some((s) => "dumpDir" in s && !!s.dumpDir);

/**
 * The memory checks made before the ranks meet, by every rank and by `validate -n` alike: the plan for
 * `place.localSize` ranks sharing this host's memory, then the rank's own device (its local rank's) for a job
 * on one. Returns the plan and its device bytes (0 for a job on the CPU).
 */
export function checkPlaceMemory(job: Job, file: string, place: Pick<Place, "size" | "localSize" | "localRank">, dumpDir?: string): { plan: MemoryPlan; device: number } {
  const plan = checkMemory(job, file, place, wantsDumps(job, dumpDir), availableMemory());
  if (job.device === "cpu") return { plan, device: 0 };
  return { plan, device: checkDeviceMemory(plan, file, `${job.device}:${place.localRank}`, deviceMemory(job.device, process.env, place.localRank)) };
}

function refuse(items: readonly MemoryItem[], p: MemoryPlan, file: string, who: string, available: Available): never {
  // The largest piece, a stage's rather than a bare tensor's where they tie: the stage is what to change.
  const top = items.reduce((a, b) => (b.bytes > a.bytes || (b.bytes === a.bytes && b.stage && !a.stage) ? b : a));
  const at = p.count !== undefined ? ` at sweep count ${p.count}` : "";
  throw new ConfigError(file, "memory",
    `${who}${at}, the largest piece ${describeItem(top)} ${bytes(top.bytes)}, but only ${bytes(available.bytes)} is available (${available.source})`);
}
