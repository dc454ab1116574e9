// What each rank's process spent on the job: CPU time (every thread, the native progress and lane
// threads included) against wall time. A rank that waits without burning its core shows CPU far below
// wall, which is what lets 8 ranks share 2 cores.
import type { NativeCommunicator } from "../comm/native.js";
import type { RankUsage } from "../results.js";

type Usage = Omit<RankUsage, "rank">;

/** Starts measuring; the returned function says what was spent since. */
export function startUsage(): () => Usage {
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  return () => {
    const spent = process.cpuUsage(cpu);
    return {
      cpu_user_s: spent.user / 1e6,
      cpu_system_s: spent.system / 1e6,
      wall_s: (performance.now() - t0) / 1e3,
      max_rss_kib: process.resourceUsage().maxRSS,
    };
  };
}

const FIELDS = 4;

/** Every rank's usage, in rank order, on every rank. Collective. */
export async function gatherUsage(comm: NativeCommunicator, mine: Usage, timeoutSec: number): Promise<RankUsage[]> {
  // A sum in which each rank fills only its own slots is a gather.
  const slots = new Float64Array(comm.size * FIELDS);
  slots.set([mine.cpu_user_s, mine.cpu_system_s, mine.wall_s, mine.max_rss_kib], comm.rank * FIELDS);
  const all = await comm.allreduceF64(slots, "sum", timeoutSec, "(report: usage)");
  return Array.from({ length: comm.size }, (_, rank) => ({
    rank,
    cpu_user_s: all[rank * FIELDS]!,
    cpu_system_s: all[rank * FIELDS + 1]!,
    wall_s: all[rank * FIELDS + 2]!,
    max_rss_kib: all[rank * FIELDS + 3]!,
  }));
}
