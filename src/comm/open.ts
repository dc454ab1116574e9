import { randomBytes } from "node:crypto";
import os from "node:os";
import type { Backend } from "../config/run-config.js";
import type { Place } from "../env/place.js";
import { agree, AgreementError, type Fingerprint } from "./agreement.js";
import { alone, launchedByMpi, type Bootstrap } from "./bootstrap.js";
import { MpiBootstrap } from "./bootstrap-mpi.js";
import { tcpBootstrap } from "./bootstrap-tcp.js";
import { native, type NativeCommunicator } from "./native.js";
import { vendorLibrary, type LibraryBackend } from "./vendor-library.js";
import type { Job } from "../config/job.js";

/** The user asked for something this build or this placement cannot do (exit code 2). */
export class BackendError extends Error {
  readonly exitCode = 2;
}

export interface OpenOptions {
  place: Place;
  backend: Backend;
  /** Admits a rank to the TCP rendezvous; strangers (another job on the port) are turned away unheard. */
  token: string;
  /** What the ranks compare before the backend starts; a rank that differs stops them all. */
  fingerprint: Fingerprint;
  timeoutMs: number;
  addr?: string;
  port?: number;
  /** The launcher's environment (default process.env): MPI launchers, SPMD_MPI_THREAD_LEVEL, NCCL_LIBRARY, HCCL_LIBRARY. */
  env?: NodeJS.ProcessEnv;
  /** The job's device (default "cpu"): "cuda" makes auto pick nccl, "npu" hccl. */
  device?: Job["device"];
}

export interface OpenCommunicator {
  comm: NativeCommunicator;
  /** How the ranks met; it stays open for small exchanges until close(). */
  bootstrap: Bootstrap;
  /** How this rank started, for the log: "backend mpi (MPI_THREAD_MULTIPLE, 2 lanes), bootstrap mpi". */
  summary: string;
  /** `failed`: leave at once, without waiting for peers that may be dead. */
  close(failed?: boolean): Promise<void>;
}

/** How a rank starts: which bootstrap meets the others, and the backend ("shm" still needs one host). */
export interface StartPlan {
  bootstrap: Bootstrap["kind"];
  backend: "mpi" | "shm" | LibraryBackend;
}

export interface PlanInput {
  requested: Backend;
  place: Place;
  env: NodeJS.ProcessEnv;
  /** The addon's backends (native().backends). */
  built: readonly string[];
  master: { addr?: string; port?: number };
  device?: Job["device"];
}

/** How ranks of a library backend (nccl, hccl) meet: alone, over the TCP store, or over MPI. */
function libraryBootstrap(backend: string, { place, env, built, master }: PlanInput): StartPlan["bootstrap"] {
  if (place.size === 1) return "none";
  if (master.addr && master.port !== undefined) return "tcp";
  if (launchedByMpi(place, env) && built.includes("mpi")) return "mpi";
  throw new BackendError(`backend ${backend}: ${place.size} ranks need MASTER_ADDR and MASTER_PORT (or an MPI launcher and the mpi backend)`);
}

/**
 * Resolves "auto" and rejects what cannot run here, before any rank communicates. auto = nccl for a job on
 * device "cuda", hccl on "npu"; else mpi when an MPI launcher started the job and the mpi backend is built, else shm (one host). The bootstrap is MPI for
 * the mpi backend, and for shm under an MPI launcher without MASTER_ADDR/MASTER_PORT; else the TCP store.
 */
export function planStart(input: PlanInput): StartPlan {
  const { requested, place, env, built, master, device = "cpu" } = input;
  const deviceBackend = ({ cuda: "nccl", npu: "hccl" } as const)[device as "cuda" | "npu"] as LibraryBackend | undefined;
  if (deviceBackend && requested !== "auto" && requested !== deviceBackend) {
    throw new BackendError(`device ${device}: backend ${requested} cannot run there; use backend ${deviceBackend} (or auto)`);
  }
  const library = requested === "nccl" || requested === "hccl" ? requested : deviceBackend;
  if (library) {
    if (!built.includes(library)) throw new BackendError(`backend ${library} is not available in this build (built: ${built.join(", ")})`);
    return { bootstrap: libraryBootstrap(library, input), backend: library };
  }
  const mpiBuilt = built.includes("mpi");
  const byMpi = launchedByMpi(place, env);
  if (requested === "mpi" || (requested === "auto" && byMpi && mpiBuilt)) {
    if (!mpiBuilt) throw new BackendError(`backend mpi is not available in this build (built: ${built.join(", ")}); see "node runner info"`);
    if (!byMpi) {
      throw new BackendError(
        `backend mpi: needs an MPI launcher (mpirun, mpiexec or srun --mpi=pmix); this process was started by ${place.launcher}`,
      );
    }
    return { bootstrap: "mpi", backend: "mpi" };
  }
  if (requested !== "auto" && requested !== "shm") {
    throw new BackendError(`backend ${requested} is not available in this build (built: ${built.join(", ")}); see "node runner info"`);
  }
  if (place.size === 1) return { bootstrap: "none", backend: "shm" };
  if (master.addr && master.port !== undefined) return { bootstrap: "tcp", backend: "shm" };
  if (byMpi && mpiBuilt) return { bootstrap: "mpi", backend: "shm" };
  throw new BackendError(
    `rendezvous: ${place.size} ranks need MASTER_ADDR and MASTER_PORT (or rendezvous.addr/port in the run config)` +
      (byMpi ? `; meeting over MPI instead needs the mpi backend, which is not built (see "node runner info")` : ""),
  );
}

function mpiThreadLevel(env: NodeJS.ProcessEnv): boolean {
  const level = env.SPMD_MPI_THREAD_LEVEL ?? "multiple";
  if (level !== "multiple" && level !== "funneled") {
    throw new BackendError(`environment: SPMD_MPI_THREAD_LEVEL=${level} is not "multiple" or "funneled"`);
  }
  return level === "funneled";
}

async function openBootstrap(kind: StartPlan["bootstrap"], o: OpenOptions, input: PlanInput): Promise<Bootstrap> {
  const { place, token, timeoutMs } = o;
  switch (kind) {
    case "none":
      return alone;
    case "mpi":
      return MpiBootstrap.open({ place, timeoutMs, funneled: mpiThreadLevel(input.env) });
    case "tcp": // planStart chose it because both are known
      return tcpBootstrap({ rank: place.rank, size: place.size, addr: input.master.addr!, port: input.master.port!, token, timeoutMs });
  }
}

/** One segment for the ranks of one host: rank 0 creates it, the others attach to the name it sends. */
async function startShm(boot: Bootstrap, place: Place): Promise<NativeCommunicator> {
  const { rank, size } = place;
  const hosts = await boot.allGather("host", os.hostname());
  if (!hosts.every((h) => h === hosts[0])) {
    throw new BackendError(
      `backend shm: ranks run on several hosts (${[...new Set(hosts)].join(", ")}) and shm needs one; the tcp backend is not built yet`,
    );
  }
  const Communicator = native().Communicator;
  let comm: NativeCommunicator | undefined;
  try {
    let name: string | undefined;
    if (rank === 0) {
      name = `/spmd-${process.pid}-${randomBytes(6).toString("hex")}`;
      comm = new Communicator({ backend: "shm", name, rank, size, create: true });
    }
    name = await boot.broadcast("shm/name", name);
    comm ??= new Communicator({ backend: "shm", name, rank, size, create: false });
    // Once everyone is attached the name is no longer needed: unlinking now means no crash can leak it.
    await boot.barrier("shm/attached");
    comm.release();
    return comm;
  } catch (err) {
    comm?.close();
    throw err;
  }
}

/**
 * Rank 0 asks the vendor library for its id (NCCL's unique id, HCCL's root info), the bootstrap carries it
 * to every rank, and all join with it. Joining blocks until every rank arrives, so it runs on the
 * communicator's progress thread (connect()): rank 0's event loop stays free to serve the TCP store the
 * others read the id from.
 */
async function startLibrary(backend: LibraryBackend, boot: Bootstrap, place: Place, env: NodeJS.ProcessEnv): Promise<NativeCommunicator> {
  const library = vendorLibrary(backend, env).path;
  const mine = place.rank === 0 ? native().libraryId(backend, library).toString("base64") : undefined;
  const id = Buffer.from(await boot.broadcast(`${backend}/id`, mine), "base64");
  const comm = new (native().Communicator)({ backend, rank: place.rank, size: place.size, localRank: place.localRank, library, id });
  try {
    await comm.connect();
    return comm;
  } catch (err) {
    comm.close();
    throw err;
  }
}

/** Meets the other ranks and starts the native communicator every stage runs on. */
export async function openCommunicator(o: OpenOptions): Promise<OpenCommunicator> {
  const input: PlanInput = {
    requested: o.backend,
    place: o.place,
    env: o.env ?? process.env,
    built: native().backends,
    master: { addr: o.addr ?? o.place.master?.addr, port: o.port ?? o.place.master?.port },
    device: o.device,
  };
  const plan = planStart(input);
  const boot = await openBootstrap(plan.bootstrap, o, input);
  let comm: NativeCommunicator;
  let backend: string = plan.backend;
  try {
    await agree(boot, o.place.rank, o.fingerprint);
    if (plan.backend === "shm") {
      comm = await startShm(boot, o.place);
    } else if (plan.backend === "nccl" || plan.backend === "hccl") {
      comm = await startLibrary(plan.backend, boot, o.place, input.env);
    } else {
      // planStart pairs the mpi backend with the MPI bootstrap, on whose thread MPI was initialised.
      const { mpi, world } = boot as MpiBootstrap;
      comm = new (native().Communicator)({ backend: "mpi", rank: o.place.rank, size: o.place.size, mpi });
      backend += ` (MPI_THREAD_${world.threadLevel.toUpperCase()}, ${world.lanes} lane${world.lanes > 1 ? "s" : ""})`;
    }
  } catch (err) {
    // After a disagreement every rank is alive and leaving: rank 0 keeps the store up until all have
    // read the answers. After other failures a peer may be dead, and nobody waits for it.
    await boot.close(!(err instanceof AgreementError));
    throw err;
  }
  return {
    comm,
    bootstrap: boot,
    summary: `backend ${backend}, bootstrap ${boot.kind}`,
    close: async (failed = false) => {
      comm.close();
      await boot.close(failed);
    },
  };
}
