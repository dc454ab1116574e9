// Which ranks share a host. Two processes count as one host when they could share memory and loopback
// addresses: same machine (boot id), same network namespace and same IPC namespace. So containers on one
// machine are separate hosts, and so are network namespaces (which the tests use as hosts); their ranks
// still share the machine's CPUs (HostIdentity.machine).
import { readFileSync, readlinkSync } from "node:fs";
import os from "node:os";

export interface HostIdentity {
  /** Equal exactly for processes of one host. */
  key: string;
  /** For people: the host name. */
  name: string;
  /**
   * Equal for processes of one kernel (its boot id, else the host name): the hosts of one machine's
   * namespaces or containers run on the same CPUs, so their ranks count together where cores are shared.
   */
  machine: string;
}

function tryRead(read: () => string): string {
  try {
    return read().trim();
  } catch {
    return ""; // not Linux, or /proc is not mounted: the host name alone then decides
  }
}

export function hostIdentity(): HostIdentity {
  const name = os.hostname();
  const boot = tryRead(() => readFileSync("/proc/sys/kernel/random/boot_id", "utf8"));
  const parts = [name, boot, tryRead(() => readlinkSync("/proc/self/ns/net")), tryRead(() => readlinkSync("/proc/self/ns/ipc"))];
  return { key: parts.join("|"), name, machine: boot || name };
}

/** "0-3,8,10-11" (the kernel's list format) as CPU numbers. */
export function parseCpuList(list: string): number[] {
  return list.split(",").filter(Boolean).flatMap((part) => {
    const [from, to = from] = part.split("-").map(Number);
    return Array.from({ length: to! - from! + 1 }, (_, i) => from! + i);
  });
}

/**
 * The CPUs this process may run on (its affinity: mpirun's default binding, srun --cpu-bind, taskset, a
 * cgroup), as the kernel lists them; null where /proc cannot say.
 */
export function cpuBinding(): number[] | null {
  const line = tryRead(() => readFileSync("/proc/self/status", "utf8")).match(/^Cpus_allowed_list:\s*(\S+)/m);
  return line ? parseCpuList(line[1]!) : null;
}

/**
 * Whether a rank bound to `mine` must leave its CPUs to others while it waits: the ranks of its machine
 * (HostIdentity.machine: every host in namespaces or containers of its kernel) whose CPUs overlap its own
 * (itself included) outnumber them. Under mpirun's default binding each rank has a
 * core of its own (it may poll, as MPI does); 8 unbound ranks on 2 cores, or a job under `taskset -c 0`,
 * share. Unknown bindings count as the whole machine's.
 */
export function sharesCores(mine: number[] | null, machineRanks: (number[] | null)[]): boolean {
  const all = Array.from({ length: os.cpus().length }, (_, i) => i);
  const own = new Set(mine ?? all);
  const overlapping = machineRanks.filter((cpus) => (cpus ?? all).some((c) => own.has(c))).length;
  return overlapping > own.size;
}

/** For `runner info` and the log: "CPUs 0 (bound; 2 online)" or "CPUs 0-1 (not bound)". */
export function describeBinding(cpus: number[] | null): string {
  const online = os.cpus().length;
  if (!cpus) return "unknown (no /proc)";
  const runs: string[] = [];
  for (let i = 0; i < cpus.length; i++) {
    let j = i;
    while (j + 1 < cpus.length && cpus[j + 1] === cpus[j]! + 1) j++;
    runs.push(j > i ? `${cpus[i]}-${cpus[j]}` : `${cpus[i]}`);
    i = j;
  }
  return `CPUs ${runs.join(",")} (${cpus.length < online ? `bound; ${online} online` : "not bound"})`;
}
