/** Where this process sits in the job, as the launcher described it. */
export interface Place {
  rank: number;
  size: number;
  localRank: number;
  localSize: number;
  /**
   * The host's index, where the launcher gives one (torchrun's GROUP_RANK/NODE_RANK, SLURM_NODEID); Open MPI
   * and MPICH give none. Like localRank and localSize it is only the launcher's word: the ranks learn their
   * hosts from each other when they meet (comm/topology.ts), and this is checked against that.
   */
  nodeRank?: number;
  launcher: "torchrun" | "runner launch" | "openmpi" | "pmix" | "mpich" | "mvapich" | "slurm" | "none";
  /** Rendezvous address; absent when an MPI launcher bootstraps the ranks instead. */
  master?: { addr: string; port?: number };
}

export type Launcher = Place["launcher"];

/** The launch environment is incomplete or contradicts itself. */
export class EnvError extends Error {
  readonly exitCode = 2;

  constructor(readonly detail: string) {
    super(`environment: ${detail}`);
    this.name = "EnvError";
  }
}
