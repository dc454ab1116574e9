// How much memory this process can still use: the host's MemAvailable, capped by its memory cgroup's limit
// (v2 memory.max, or v1 memory.limit_in_bytes) less what the cgroup already uses. Read from files only, so a
// test can point `root` at a directory laid out like / and say what a host looks like.
import { readFileSync } from "node:fs";
import path from "node:path";

export interface AvailableMemory {
  readonly bytes: number;
  /** Where the number comes from: "MemAvailable" or the cgroup file that capped it. */
  readonly source: string;
}

function read(file: string): string | undefined {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return undefined;
  }
}

function memAvailable(root: string): number | undefined {
  const kib = /^MemAvailable:\s+(\d+) kB/m.exec(read(path.join(root, "proc/meminfo")) ?? "")?.[1];
  return kib === undefined ? undefined : Number(kib) * 1024;
}

/** A cgroup's limit less its usage; undefined when it sets no limit ("max", or v1's huge sentinel). */
function headroom(dir: string, limitFile: string, usageFile: string): number | undefined {
  const limit = Number(read(path.join(dir, limitFile))?.trim());
  const usage = Number(read(path.join(dir, usageFile))?.trim());
  if (!Number.isFinite(limit) || !Number.isFinite(usage) || limit >= 2 ** 60) return undefined;
  return Math.max(0, limit - usage);
}

/**
 * The memory cgroup's files: under its path from /proc/self/cgroup, or at the mount's top where a container
 * shows its own cgroup as the root of the hierarchy.
 */
function cgroupHeadroom(root: string): { bytes: number; source: string } | undefined {
  const lines = (read(path.join(root, "proc/self/cgroup")) ?? "").split("\n");
  const v2 = lines.find((l) => l.startsWith("0::"))?.slice(3);
  const v1 = lines.map((l) => /^\d+:([^:]*\bmemory\b[^:]*):(.*)$/.exec(l)).find(Boolean);
  const candidates: [string, string, string][] = [];
  if (v1) {
    for (const rel of [v1[2]!, "/"]) candidates.push([path.join(root, "sys/fs/cgroup/memory", rel), "memory.limit_in_bytes", "memory.usage_in_bytes"]);
  }
  if (v2 !== undefined) {
    for (const rel of [v2, "/"]) candidates.push([path.join(root, "sys/fs/cgroup", rel), "memory.max", "memory.current"]);
  }
  for (const [dir, limit, usage] of candidates) {
    const bytes = headroom(dir, limit, usage);
    if (bytes !== undefined) return { bytes, source: `the cgroup limit in /${path.relative(root, path.join(dir, limit))}` };
  }
  return undefined;
}

/** What this process can still allocate; undefined where /proc says nothing (not Linux). */
export function availableMemory(root = "/"): AvailableMemory | undefined {
  const host = memAvailable(root);
  const cgroup = cgroupHeadroom(root);
  if (cgroup && (host === undefined || cgroup.bytes < host)) return cgroup;
  return host === undefined ? undefined : { bytes: host, source: "MemAvailable" };
}
