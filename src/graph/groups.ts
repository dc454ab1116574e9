// Process groups and streams (DESIGN.md, "Graphs, streams and groups"): the partitions a job's `groups`
// name, resolved against the world, and the lane each stream runs on.
import { plural } from "../config/errors.js";
import type { GroupSpec, Job, Stage } from "../config/job.js";

/** Lanes the native backends offer (shm, tcp, hybrid, mpi with MPI_THREAD_MULTIPLE): "main" plus three. */
export const MAX_STREAMS = 4;

/** The stream a stage runs on: its own, else igather's own stream, else "main". */
export function streamOf(stage: Stage): string {
  return stage.stream ?? (stage.op === "igather" ? "igather" : "main");
}

/** Lane per stream: "main" is lane 0, the others follow in order of their first stage in `order`. */
export function streamLanes(order: readonly Stage[]): Map<string, number> {
  const lanes = new Map([["main", 0]]);
  for (const s of order) if (!lanes.has(streamOf(s))) lanes.set(streamOf(s), lanes.size);
  return lanes;
}


/** Which ranks share a host, in order of their lowest rank: from each rank's host as the ranks found them. */
export function hostsOf(hostOf: readonly number[]): number[][] {
  return byKey(hostOf.length, (r) => hostOf[r]!);
}

/** The ranks grouped by key, listed by their lowest rank. */
function byKey(worldSize: number, key: (rank: number) => number): number[][] {
  const groups = new Map<number, number[]>();
  for (let r = 0; r < worldSize; ++r) {
    const k = key(r);
    const group = groups.get(k);
    if (group) group.push(r);
    else groups.set(k, [r]);
  }
  return [...groups.values()].sort((a, b) => a[0]! - b[0]!);
}

/** Why an explicit partition does not hold every rank of the world exactly once, or null. */
function explicitProblem(ranks: readonly (readonly number[])[], worldSize: number): string | null {
  const seen = new Map<number, number>();
  for (const [g, group] of ranks.entries()) {
    for (const r of group) {
      if (r >= worldSize) return `rank ${r} (group ${g}) is out of range for ${plural(worldSize, "rank")}`;
      if (seen.has(r)) return `rank ${r} is in group ${seen.get(r)} and again in group ${g}`;
      seen.set(r, g);
    }
  }
  const missing = Array.from({ length: worldSize }, (_, r) => r).filter((r) => !seen.has(r));
  return missing.length ? `rank${missing.length > 1 ? "s" : ""} ${missing.join(", ")} of ${worldSize} in no group` : null;
}

/** The groups of a partition (each in world-rank order), or a string saying why it is not one. */
export function resolveGroups(spec: GroupSpec, worldSize: number, hosts: readonly (readonly number[])[]): number[][] | string {
  if ("block" in spec) return byKey(worldSize, (r) => Math.floor(r / spec.block));
  if ("stride" in spec) return byKey(worldSize, (r) => r % spec.stride);
  if ("ranks" in spec) {
    const problem = explicitProblem(spec.ranks, worldSize);
    return problem ?? spec.ranks.map((g) => [...g].sort((a, b) => a - b)).sort((a, b) => a[0]! - b[0]!);
  }
  if (spec.split === "host") return hosts.map((h) => [...h]);
  const localIndex = new Map(hosts.flatMap((h) => h.map((r, i) => [r, i] as const)));
  return byKey(worldSize, (r) => localIndex.get(r)!);
}

/** Every group's partition for this world, by name (validateGraph has checked they resolve). */
export function jobGroups(job: Job, worldSize: number, hosts: readonly (readonly number[])[]): Map<string, number[][]> {
  return new Map(Object.entries(job.groups ?? {}).map(([name, spec]) => {
    const groups = resolveGroups(spec, worldSize, hosts);
    if (typeof groups === "string") throw new Error(`group "${name}": ${groups}; validate the job first`);
    return [name, groups];
  }));
}

/** "2 groups of 4 ranks" or "groups of 3, 1 ranks". */
export function describeGroups(groups: readonly (readonly number[])[]): string {
  const sizes = [...new Set(groups.map((g) => g.length))];
  return sizes.length === 1 ? `${groups.length} group${groups.length > 1 ? "s" : ""} of ${sizes[0]} rank${sizes[0]! > 1 ? "s" : ""}` : `groups of ${groups.map((g) => g.length).join(", ")} ranks`;
}
