// Per kind of link on the hybrid transport (shm within hosts, tcp between): what each stage moved and how
// long it took, per step. Bytes add up over ranks; time is the slowest rank's, like an op's time.
import type { NativeCommunicator, NativeOpResult } from "../comm/native.js";
import type { LinkClasses } from "../results.js";

/** Per op (undefined for an op without counters, a nonblocking one). Collective: every rank calls it, or none. */
export async function linkClasses(comm: NativeCommunicator, results: NativeOpResult[], iterations: number, timeoutSec: number): Promise<(LinkClasses | undefined)[] | undefined> {
  const per = (v: number | undefined) => (v ?? 0) / iterations;
  const bytes = Float64Array.from(results.flatMap((r) => [per(r.links?.shmBytes), per(r.links?.tcpBytes)]));
  const us = Float64Array.from(results.flatMap((r) => [per(r.links?.shmUs), per(r.links?.tcpUs)]));
  const sent = await comm.allreduceF64(bytes, "sum", timeoutSec, "(report: link bytes)");
  const slowest = await comm.allreduceF64(us, "max", timeoutSec, "(report: link time)");
  return results.map((r, i) =>
    r.links ? { shm: { bytes: sent[2 * i]!, us: slowest[2 * i]! }, tcp: { bytes: sent[2 * i + 1]!, us: slowest[2 * i + 1]! } } : undefined,
  );
}
