// The environment a run's manifest records (env/ is the one reader of the launchers' variables).
/** The variables that change what collectives do: the libraries', the launchers', and the runner's own. */
const RECORDED_ENV = /^(NCCL_|UCX_|OMPI_MCA_|MPICH_|MPIR_CVAR_|HCCL_|SLURM_|SPMD_)|^CUDA_VISIBLE_DEVICES$/;
/** Secrets the runner's own variables hold: recorded as set, never by value. */
const SECRET_ENV = new Set(["SPMD_RUNNER_TOKEN"]);
/** The runner's own bookkeeping, different in every run and no setting: recording it would make every two runs differ. */
const UNRECORDED_ENV = new Set(["SPMD_LAUNCHER_PID"]);

/** The recorded variables of `env`, sorted by name. */
export function recordedEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  const keys = Object.keys(env).filter((k) => RECORDED_ENV.test(k) && !UNRECORDED_ENV.has(k)).sort();
  return Object.fromEntries(keys.map((k) => [k, SECRET_ENV.has(k) ? "(set)" : env[k]!]));
}
