/** Where this process sits in the job, as the launcher described it. */
export interface Place {
  rank: number;
  size: number;
  localRank: number;
  localSize: number;
  nodeRank: number;
  launcher: "torchrun" | "openmpi" | "pmix" | "mpich" | "mvapich" | "slurm" | "none";
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
