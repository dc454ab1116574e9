import { MAX_WORLD } from "../config/job.js";
import { expandHostlist, expandTasksPerNode } from "./hostlist.js";
import { EnvError, type Launcher, type Place } from "./place.js";

type Env = Record<string, string | undefined>;

/** A number read from the environment, with how to show it in messages ("RANK=3"). */
interface Var {
  value: number;
  label: string;
}

/** Empty counts as unset: `export RANK=` is how shells clear a variable for child processes. */
function get(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === "" ? undefined : value;
}

function parseCount(name: string, raw: string): Var {
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(Number(raw))) {
    throw new EnvError(`${name}=${raw} is not a non-negative integer`);
  }
  return { value: Number(raw), label: `${name}=${raw}` };
}

/** The first set variable among equivalent names; any others that are set must agree with it. */
function readVar(env: Env, names: readonly string[]): Var | undefined {
  let found: Var | undefined;
  for (const name of names) {
    const raw = get(env, name);
    if (raw === undefined) continue;
    const v = parseCount(name, raw);
    if (found && found.value !== v.value) throw new EnvError(`${found.label} and ${v.label} disagree`);
    found ??= v;
  }
  return found;
}

function isAre(items: readonly string[]): string {
  return `${items.join(", ")} ${items.length === 1 ? "is" : "are"}`;
}

/**
 * Not an error yet: a later launcher may still have a complete set (srun --mpi=pmix sets
 * PMIX_RANK without PMI_SIZE next to a full SLURM set). Thrown only if nothing else matches.
 */
function incomplete(env: Env, names: readonly string[], missing: readonly string[], needs: string): EnvError {
  const seen = names.filter((n) => get(env, n) !== undefined).map((n) => `${n}=${get(env, n)}`);
  return new EnvError(`${isAre(seen)} set but ${isAre(missing)} missing (${needs})`);
}

function port(env: Env): number | undefined {
  const v = readVar(env, ["MASTER_PORT"]);
  if (v && (v.value < 1 || v.value > 65535)) throw new EnvError(`${v.label} is not a port number (1..65535)`);
  return v?.value;
}

/** MPI launchers bootstrap without a master, but an explicit MASTER_ADDR/MASTER_PORT still counts. */
function masterAt(addr: string | undefined, env: Env, fallbackPort?: number): Place["master"] {
  const p = port(env) ?? fallbackPort;
  if (addr === undefined) return undefined;
  return p === undefined ? { addr } : { addr, port: p };
}

interface Layout {
  launcher: Launcher;
  rank: Var;
  size: Var;
  localRank: Var;
  localSize: Var;
  nodeRank?: Var;
  master?: Place["master"];
}

function place({ launcher, rank, size, localRank, localSize, nodeRank, master }: Layout): Place {
  const check = (ok: boolean, message: string) => {
    if (!ok) throw new EnvError(message);
  };
  check(size.value >= 1, `${size.label} must be at least 1`);
  check(size.value <= MAX_WORLD, `${size.label} is more than ${MAX_WORLD}, the most ranks a job runs at`);
  check(rank.value < size.value, `${rank.label} must be less than ${size.label}`);
  check(localSize.value >= 1, `${localSize.label} must be at least 1`);
  check(localRank.value < localSize.value, `${localRank.label} must be less than ${localSize.label}`);
  check(localSize.value <= size.value, `${localSize.label} must not exceed ${size.label}`);
  if (nodeRank) check(nodeRank.value < size.value, `${nodeRank.label} must be less than ${size.label}`);
  return {
    rank: rank.value,
    size: size.value,
    localRank: localRank.value,
    localSize: localSize.value,
    ...(nodeRank && { nodeRank: nodeRank.value }),
    launcher,
    ...(master && { master }),
  };
}

type Row = (env: Env) => Place | EnvError | undefined;

/**
 * The launcher's pid, which `runner launch` gives its ranks: they end with it (run/rank.ts, endWithLauncher),
 * the parent a rank must still have once it asked, else the launcher died before and the rank would run on
 * alone. It, not SPMD_RUNNER_TOKEN, tells runner launch's ranks from ones started by hand with a token.
 */
export const LAUNCHER_PID_ENV = "SPMD_LAUNCHER_PID";

const TORCHRUN_NAMES = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"];

const torchrun: Row = (env) => {
  const rank = readVar(env, ["RANK"]);
  const size = readVar(env, ["WORLD_SIZE"]);
  if (!rank && !size) return undefined;
  const localRank = readVar(env, ["LOCAL_RANK"]);
  const localSize = readVar(env, ["LOCAL_WORLD_SIZE"]);
  const addr = get(env, "MASTER_ADDR");
  const missing: string[] = [];
  if (!rank) missing.push("RANK");
  if (!size) missing.push("WORLD_SIZE");
  if (localRank && !localSize) missing.push("LOCAL_WORLD_SIZE");
  if (!localRank && localSize) missing.push("LOCAL_RANK");
  if (size?.value !== 1) {
    if (addr === undefined) missing.push("MASTER_ADDR");
    if (get(env, "MASTER_PORT") === undefined) missing.push("MASTER_PORT");
  }
  if (!rank || !size || missing.length > 0) {
    return incomplete(env, TORCHRUN_NAMES, missing, "torchrun-style launch needs RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT");
  }
  return place({
    // `runner launch` gives its ranks its pid besides torchrun's variables: messages then name the command run.
    launcher: get(env, LAUNCHER_PID_ENV) !== undefined ? "runner launch" : "torchrun",
    rank,
    size,
    // Both absent means a single host: every rank is local.
    localRank: localRank ?? rank,
    localSize: localSize ?? size,
    nodeRank: readVar(env, ["GROUP_RANK", "NODE_RANK"]),
    master: masterAt(addr, env),
  });
};

interface MpiNames {
  rank: string[];
  size: string[];
  localRank: string[];
  localSize: string[];
}

/** A launcher that exports rank, size, local rank and local size, each under one or more names. */
function mpiRow(label: string, launcher: (env: Env) => Launcher, names: MpiNames): Row {
  const fields = [names.rank, names.size, names.localRank, names.localSize];
  const needs = `${label} launch needs ${fields.map((f) => f.join(" or ")).join(", ")}`;
  return (env) => {
    const values = fields.map((f) => readVar(env, f));
    const [rank, size, localRank, localSize] = values;
    if (!rank && !size) return undefined;
    if (!rank || !size || !localRank || !localSize) {
      const missing = fields.filter((_, i) => !values[i]).map((f) => f.join(" or "));
      return incomplete(env, fields.flat(), missing, needs);
    }
    return place({
      launcher: launcher(env),
      rank,
      size,
      localRank,
      localSize,
      master: masterAt(get(env, "MASTER_ADDR"), env),
    });
  };
}

const openMpi = mpiRow("Open MPI", () => "openmpi", {
  rank: ["OMPI_COMM_WORLD_RANK"],
  size: ["OMPI_COMM_WORLD_SIZE"],
  localRank: ["OMPI_COMM_WORLD_LOCAL_RANK"],
  localSize: ["OMPI_COMM_WORLD_LOCAL_SIZE"],
  // No node index: OMPI_COMM_WORLD_NODE_RANK is the rank's index on its host, not the host's number.
});

const pmi = mpiRow("PMIx/MPICH", (env) => (get(env, "PMIX_RANK") === undefined ? "mpich" : "pmix"), {
  rank: ["PMIX_RANK", "PMI_RANK"],
  size: ["PMI_SIZE"],
  localRank: ["MPI_LOCALRANKID", "PALS_LOCAL_RANKID"],
  localSize: ["MPI_LOCALNRANKS"],
});

const mvapich = mpiRow("MVAPICH", () => "mvapich", {
  rank: ["MV2_COMM_WORLD_RANK"],
  size: ["MV2_COMM_WORLD_SIZE"],
  localRank: ["MV2_COMM_WORLD_LOCAL_RANK"],
  localSize: ["MV2_COMM_WORLD_LOCAL_SIZE"],
});

const SLURM_NAMES = ["SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_NODEID"];
const SLURM_NEEDS =
  "SLURM launch needs SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, and SLURM_NTASKS_PER_NODE or SLURM_TASKS_PER_NODE with SLURM_NODEID";

/** This node's task count from SLURM_TASKS_PER_NODE ("2(x3),1"), indexed by SLURM_NODEID. */
function tasksOnNode(list: string, node: Var): Var {
  let counts: number[];
  try {
    counts = expandTasksPerNode(list);
  } catch (error) {
    throw new EnvError(`SLURM_TASKS_PER_NODE: ${(error as EnvError).detail}`);
  }
  const label = `SLURM_TASKS_PER_NODE=${list}`;
  if (node.value >= counts.length) throw new EnvError(`${node.label} has no entry in ${label} (${counts.length} nodes)`);
  return { value: counts[node.value], label: `${label} (${counts[node.value]} on ${node.label})` };
}

/** First host of the step's node list, where the TCP store of rank 0 is expected. */
function slurmMasterAddr(env: Env): string | undefined {
  for (const name of ["SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"]) {
    const list = get(env, name);
    if (list === undefined) continue;
    try {
      return expandHostlist(list)[0];
    } catch (error) {
      throw new EnvError(`${name}: ${(error as EnvError).detail}`);
    }
  }
  return get(env, "SLURM_LAUNCH_NODE_IPADDR");
}

/**
 * Without MASTER_PORT every task of a step derives the same port from the job and step ids:
 * 16384 + (SLURM_JOB_ID × 32 + SLURM_STEP_ID) mod 16384. That is below Linux's ephemeral range
 * (32768-60999), so no port the kernel hands out collides with it, and it differs for the first 32 steps of
 * a job, so steps running at once on the same first node do not share it.
 */
export function slurmPort(env: Env): number | undefined {
  const job = readVar(env, ["SLURM_JOB_ID", "SLURM_JOBID"]);
  if (!job) return undefined;
  const step = readVar(env, ["SLURM_STEP_ID", "SLURM_STEPID"])?.value ?? 0;
  return 16384 + ((job.value * 32 + step) % 16384);
}

// SLURM_NTASKS alone only says the allocation's size (salloc, sbatch); SLURM_PROCID marks an srun task.
const slurm: Row = (env) => {
  const rank = readVar(env, ["SLURM_PROCID"]);
  if (!rank) return undefined;
  const size = readVar(env, ["SLURM_NTASKS"]);
  const localRank = readVar(env, ["SLURM_LOCALID"]);
  const node = readVar(env, ["SLURM_NODEID"]);
  const tasksPerNode = get(env, "SLURM_TASKS_PER_NODE");
  const missing: string[] = [];
  if (!size) missing.push("SLURM_NTASKS");
  if (!localRank) missing.push("SLURM_LOCALID");
  const localSize =
    readVar(env, ["SLURM_NTASKS_PER_NODE"]) ?? (tasksPerNode !== undefined && node ? tasksOnNode(tasksPerNode, node) : undefined);
  if (!localSize) missing.push(tasksPerNode === undefined ? "SLURM_NTASKS_PER_NODE or SLURM_TASKS_PER_NODE" : "SLURM_NODEID");
  if (!size || !localRank || !localSize) return incomplete(env, SLURM_NAMES, missing, SLURM_NEEDS);
  return place({
    launcher: "slurm",
    rank,
    size,
    localRank,
    localSize,
    nodeRank: node,
    master: masterAt(get(env, "MASTER_ADDR") ?? slurmMasterAddr(env), env, slurmPort(env)),
  });
};

/** Checked in this order; torchrun-style variables win because `runner launch` sets them inside any allocation. */
const ROWS: Row[] = [torchrun, openMpi, pmi, mvapich, slurm];

/**
 * This process's place in the job from the launcher's environment variables. The first
 * complete set wins; contradictions throw at once; an incomplete set throws only when no
 * later launcher has a complete one. No launcher at all means a single rank.
 */
export function discoverPlace(env: Env): Place {
  let firstIncomplete: EnvError | undefined;
  for (const row of ROWS) {
    const found = row(env);
    if (found instanceof EnvError) firstIncomplete ??= found;
    else if (found) return found;
  }
  if (firstIncomplete) throw firstIncomplete;
  return { rank: 0, size: 1, localRank: 0, localSize: 1, nodeRank: 0, launcher: "none" };
}

/**
 * Where `validate -n size` puts a rank: under a launcher (validate run inside an allocation or a launched
 * shell) its local ranks; without one, all `size` ranks on this host, as `runner launch -n size` starts them.
 */
export function plannedPlace(size: number, env: Env): Pick<Place, "size" | "localSize" | "localRank"> {
  const p = discoverPlace(env);
  return { size, localSize: p.launcher === "none" ? size : Math.min(p.localSize, size), localRank: p.launcher === "none" ? 0 : p.localRank };
}

/** This process's rank for messages: the launcher's, or undefined without a launcher or with an environment that says nothing consistent. */
export function rankForMessages(env: Env): number | undefined {
  try {
    const place = discoverPlace(env);
    return place.launcher === "none" ? undefined : place.rank;
  } catch {
    return undefined;
  }
}

const MPI_LAUNCHERS: readonly Place["launcher"][] = ["openmpi", "pmix", "mpich", "mvapich"];
// srun exports these only when it runs a PMI plugin (--mpi=pmix, pmi2), which MPI_Init needs to find the job.
const PMI_VARIABLES = ["PMIX_RANK", "PMI_RANK", "PMI_FD"];

/** Started by an MPI launcher (mpirun/mpiexec, or srun with PMI): MPI_Init will find the job's ranks. */
export function launchedByMpi(place: Place, env: Env): boolean {
  if (MPI_LAUNCHERS.includes(place.launcher)) return true;
  return place.launcher === "slurm" && PMI_VARIABLES.some((name) => (env[name] ?? "") !== "");
}
