// How the ranks of a job meet before their communicator exists, and exchange the little they must agree
// on (host names, the shm segment's name, the run directory): over the TCP store that rank 0 hosts, or
// over MPI when an MPI launcher started the job. A rank alone needs neither.

import type { StoreClient } from "./store.js";

export interface Bootstrap {
  readonly kind: "none" | "tcp" | "mpi";
  /** Every rank's `value`, in rank order. `key` names the exchange; each key is used once per job. */
  allGather(key: string, value: string): Promise<string[]>;
  /** Rank 0's `value` on every rank (the others pass undefined). */
  broadcast(key: string, value: string | undefined): Promise<string>;
  barrier(key: string): Promise<void>;
  /** The TCP store the ranks met over (tcp bootstrap only): a start-up step notes there who reached it (startup.ts). */
  readonly store?: Pick<StoreClient, "set" | "absent">;
  /**
   * Every rank calls it once, after closing the communicator it started. `failed`: leave at once, not
   * waiting for peers that may be dead (the TCP store; under MPI the launcher ends a job whose rank died).
   */
  close(failed?: boolean): Promise<void>;
}

/** The bootstrap of a job of one rank: there is no one to exchange with. */
export const alone: Bootstrap = {
  kind: "none",
  allGather: async (_key, value) => [value],
  broadcast: async (key, value) => {
    if (value === undefined) throw new Error(`bootstrap: rank 0 has no value for "${key}"`);
    return value;
  },
  barrier: async () => {},
  close: async () => {},
};

