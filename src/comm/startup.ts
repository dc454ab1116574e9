// A start-up step that waits on every rank inside a library that has no deadline of its own (NCCL's and
// HCCL's init, MPI's): each rank notes on the store that it reached the step, and a rank still waiting at the
// deadline ends with the step and the ranks that never reached it (over MPI there is no store: MPI's own
// start-up is how ranks would meet). The library's call cannot be cancelled; it stays blocked on its thread,
// so the communicator is left as it is and the process exits.
import type { Bootstrap } from "./bootstrap.js";
import type { NativeErrorCode } from "./native.js";
import { notArrived } from "./store.js";

/** A step passed its deadline: the communicator is stuck inside it and must not be closed (close waits on it). */
export class StartupTimeout extends Error {
  readonly code: NativeErrorCode = "ERR_SPMD_TIMEOUT";
}

const key = (step: string, rank: number) => `startup/${step}/${rank}`;

/** "; not arrived: rank 2, rank 5", "; every rank reached it", or "" where no store can tell. */
async function arrivals(boot: Bootstrap, step: string, size: number): Promise<string> {
  const { store } = boot;
  if (!store) return "";
  const absent = await store.absent(Array.from({ length: size }, (_, r) => key(step, r)));
  if (!absent) return "; the store on rank 0 is gone, so who arrived is unknown";
  return notArrived(absent) || "; every rank reached it";
}

/** Runs `work` (step `step` of rank `rank` of `size`) and fails at `timeoutMs` naming the ranks that never came. */
export async function underDeadline<T>(step: string, boot: Bootstrap, at: { rank: number; size: number }, timeoutMs: number, work: () => Promise<T>): Promise<T> {
  await boot.store?.set(key(step, at.rank), "");
  return withinDeadline(timeoutMs, work, async () => new StartupTimeout(`${step} did not finish within ${timeoutMs / 1000} s${await arrivals(boot, step, at.size)}`));
}

/** Runs `work`; at `timeoutMs` fails instead with the error `late()` makes then, leaving `work` where it is. */
export async function withinDeadline<T>(timeoutMs: number, work: () => Promise<T>, late: () => Promise<Error>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const passed = new Promise<never>((_, reject) => {
    timer = setTimeout(() => void late().then(reject), timeoutMs);
  });
  try {
    return await Promise.race([work(), passed]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Every rank's `step()`, once all have run it. If any failed, every rank fails with the lowest failing rank's
 * error (its own where it failed itself): the same line on every rank, which a launcher prints once, and
 * no rank waits out its deadline for a segment another rank could not make or would not attach to.
 */
export async function allOrNone(boot: Bootstrap, key: string, step: () => string): Promise<string[]> {
  let mine: { value?: string; error?: string };
  let own: unknown;
  try {
    mine = { value: step() };
  } catch (err) {
    own = err;
    mine = { error: (err as Error).message };
  }
  const all = (await boot.allGather(key, JSON.stringify(mine))).map((s) => JSON.parse(s) as typeof mine);
  const failed = all.find((a) => a.error !== undefined);
  if (failed) throw own ?? new Error(failed.error);
  return all.map((a) => a.value!);
}
