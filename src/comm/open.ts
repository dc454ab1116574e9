import type { Backend } from "../config/run-config.js";
import { launchedByMpi } from "../env/discover.js";
import type { Place } from "../env/place.js";
import { agree, AgreementError, type Fingerprint } from "./agreement.js";
import { alone, type Bootstrap } from "./bootstrap.js";
import { MpiBootstrap } from "./bootstrap-mpi.js";
import { DERIVED_SECRET_WARNING, fingerprintDigest, keyFor, secretOverMpi, type JobSecret } from "./secret.js";
import { tcpBootstrap } from "./bootstrap-tcp.js";
import { BackendError } from "./errors.js";
import { cpuBinding, hostIdentity, sharesCores, type HostIdentity } from "./host.js";
import { buildCommandLine, native, type NativeCommunicator } from "./native.js";
import { sweepStaleSegments, sweptNote } from "./shm-names.js";
import { singleCopyAllowed, startShm } from "./start-shm.js";
import { StartupTimeout, underDeadline } from "./startup.js";
import { startTcp } from "./start-tcp.js";
import {
  contradictions, describeHosts, hostPlace, linkCounts, MPI_SHARED, topologyOf, type LauncherView, type LinkCounts, type Topology,
} from "./topology.js";
import { vendorLibrary, type LibraryBackend } from "./vendor-library.js";
import type { Job } from "../config/job.js";
import type { SecretSource } from "../results.js";

export interface OpenOptions {
  place: Place;
  backend: Backend;
  /** The job's secret as known before the ranks meet (under an MPI launcher rank 0 draws another). */
  secret: JobSecret;
  /** What the ranks compare before the backend starts; a rank that differs stops them all. */
  fingerprint: Fingerprint;
  timeoutMs: number;
  addr?: string;
  port?: number;
  /** The tcp backend's interface or address (tcp.iface, --iface); see tcp-address.ts. */
  iface?: string;
  /** The debug log: connections refused because they could not prove they hold the secret. */
  debug?: (line: string) => void;
  /** The launcher's environment (default process.env): MPI launchers, SPMD_MPI_THREAD_LEVEL, NCCL_LIBRARY, HCCL_LIBRARY. */
  env?: NodeJS.ProcessEnv;
  /** The job's device (default "cpu"): "cuda" makes auto pick nccl, "npu" hccl. */
  device?: Job["device"];
}

/** Where the ranks run (on every backend) and how they are linked (absent where a library links them: mpi, nccl, hccl). */
export interface JobTopology extends Topology {
  links?: LinkCounts;
}

export interface OpenCommunicator {
  comm: NativeCommunicator;
  /** How the ranks met; it stays open for small exchanges until close(). */
  bootstrap: Bootstrap;
  topology: JobTopology;
  /**
   * For the log: where the launcher's variables or MPI contradict the hosts (the same lines on every rank), and
   * on rank 0 alone that the secret is derived.
   */
  warnings: string[];
  /** Where the job's secret came from (results.json's manifest.rendezvous_secret). */
  secret: SecretSource;
  /** How this rank started, for the log: "backend mpi (MPI_THREAD_MULTIPLE, 2 lanes), bootstrap mpi". */
  summary: string;
  /** `failed`: leave at once, without waiting for peers that may be dead. */
  close(failed?: boolean): Promise<void>;
}

/**
 * How a rank starts: which bootstrap meets the others, and the backend. "auto" (for host memory) is decided
 * once the ranks have met and know their hosts: shm when all share one, else tcp between hosts and shm
 * within each ("shm+tcp"; plain tcp when no host holds two ranks). "shm+tcp" asks for that hybrid by name,
 * as under an MPI launcher, where "auto" means the mpi backend.
 */
export interface StartPlan {
  bootstrap: Bootstrap["kind"];
  backend: "mpi" | "shm" | "tcp" | "shm+tcp" | "auto" | LibraryBackend;
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
 * Resolves what can be resolved before any rank communicates, and rejects what cannot run here. auto =
 * nccl for a job on device "cuda", hccl on "npu"; else mpi when an MPI launcher started the job and the mpi
 * backend is built; otherwise it waits for the hosts. The bootstrap is MPI for the mpi backend, and for
 * shm/tcp under an MPI launcher without MASTER_ADDR/MASTER_PORT; else the TCP store.
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
  const overTcp = requested === "tcp" || requested === "shm+tcp";
  if ((requested !== "auto" && requested !== "shm" && !overTcp) || (overTcp && !built.includes("tcp"))) {
    throw new BackendError(`backend ${requested} is not available in this build (built: ${built.join(", ")}); see "node runner info"`);
  }
  if (place.size === 1) return { bootstrap: "none", backend: requested === "tcp" ? "tcp" : "shm" };
  if (master.addr && master.port !== undefined) return { bootstrap: "tcp", backend: requested };
  if (byMpi && mpiBuilt) return { bootstrap: "mpi", backend: requested };
  throw new BackendError(
    `rendezvous: ${place.size} ranks need MASTER_ADDR and MASTER_PORT (or rendezvous.addr/port in the run config)` +
      (byMpi ? `; meeting over MPI instead needs the mpi backend, which is not built (see "node runner info")` : ""),
  );
}

/**
 * Said first (by `runner info` and by a run) when an MPI launcher started this process but the addon has no
 * MPI backend, as when MPI was installed after the build: how to get one.
 */
export function mpiNotBuiltNote(place: Place, env: NodeJS.ProcessEnv, built: readonly string[]): string | undefined {
  if (!launchedByMpi(place, env) || built.includes("mpi")) return undefined;
  return `launched by ${place.launcher}, but this build has no MPI backend (CMake found no MPI when it was built); ` +
    `to run over MPI, install it (e.g. openmpi-bin libopenmpi-dev) and run \`${buildCommandLine()}\``;
}

/**
 * Said once, by rank 0, where the mpi backend runs on MPICH with more ranks on a host than cores: MPICH polls
 * without yielding while a rank waits, so each collective waits out the other ranks' time slices (a 16 KiB
 * allreduce 151-292 ms under mpiexec.mpich -np 4 on 2 cores, 30-60x Open MPI's, which yields when
 * oversubscribed: native/src/backends/mpi/runtime.cc).
 */
export function mpichCrowdedNote(backend: string, mpiLibrary: string | undefined, localSize: number, cores: number): string | undefined {
  if (!backend.startsWith("mpi") || !/\bMPICH\b/i.test(mpiLibrary ?? "") || localSize <= cores) return undefined;
  return `MPICH with ${localSize} ranks on ${cores} cores: MPICH polls without yielding while a rank waits, so every collective ` +
    "waits out the other ranks' time slices (30-60x slower than with a core each); run with ranks <= cores, or under Open MPI's mpirun, which yields";
}

function mpiThreadLevel(env: NodeJS.ProcessEnv): boolean {
  const level = env.SPMD_MPI_THREAD_LEVEL ?? "multiple";
  if (level !== "multiple" && level !== "funneled") {
    throw new BackendError(`environment: SPMD_MPI_THREAD_LEVEL=${level} is not "multiple" or "funneled"`);
  }
  return level === "funneled";
}

async function openBootstrap(kind: StartPlan["bootstrap"], o: OpenOptions, input: PlanInput): Promise<Bootstrap> {
  const { place, secret, timeoutMs } = o;
  switch (kind) {
    case "none":
      return alone;
    case "mpi":
      return MpiBootstrap.open({ place, timeoutMs, funneled: mpiThreadLevel(input.env) });
    case "tcp": // planStart chose it because both are known
      return tcpBootstrap({ rank: place.rank, size: place.size, addr: input.master.addr!, port: input.master.port!, token: secret.value, timeoutMs, refused: o.debug });
  }
}

interface Met {
  topo: Topology;
  warnings: string[];
  /** This rank's CPUs are shared with other ranks of its machine (see sharesCores): it must not spin. */
  sharesCores: boolean;
}

/**
 * Which ranks share a host, from the identities every rank sends, checked against what each rank's launcher
 * said and, over MPI, against MPI_Comm_split_type(MPI_COMM_TYPE_SHARED).
 */
async function meet(boot: Bootstrap, place: Place): Promise<Met> {
  const said: LauncherView = { localRank: place.localRank, localSize: place.localSize, nodeRank: place.nodeRank };
  const mpi = boot instanceof MpiBootstrap ? boot.world.shared : undefined;
  type Sent = HostIdentity & { said: LauncherView; mpi?: LauncherView; cpus: number[] | null };
  const cpus = cpuBinding();
  const all = (await boot.allGather("host", JSON.stringify({ ...hostIdentity(), said, mpi, cpus }))).map((s) => JSON.parse(s) as Sent);
  const topo = topologyOf(all);
  const warnings = [contradictions(topo, all.map((a) => a.said)), mpi && contradictions(topo, all.map((a) => a.mpi!), MPI_SHARED)];
  const neighbours = all.filter((a) => a.machine === all[place.rank]!.machine).map((a) => a.cpus);
  return { topo, warnings: warnings.filter((w): w is string => !!w), sharesCores: sharesCores(cpus, neighbours) };
}

/** auto once the hosts are known. */
function byTopology(topo: Topology): "shm" | "tcp" | "shm+tcp" {
  if (topo.hosts.length === 1) return "shm";
  return topo.hosts.some((h) => h.ranks.length > 1) ? "shm+tcp" : "tcp";
}

/**
 * The communicators each library backend joins, one per lane (stream): nccl one per stream the graphs allow
 * (graph/groups.ts MAX_STREAMS, native kMaxLanes), all made at start-up, so the streams of any job overlap;
 * hccl one, so it runs no stream but "main".
 */
const LIBRARY_LANES: Record<LibraryBackend, number> = { nccl: 4, hccl: 1 };

/**
 * Rank 0 asks the vendor library for its ids (NCCL's unique ids, HCCL's root info), the bootstrap carries them
 * to every rank, and all join with them. Joining blocks until every rank arrives, so it runs on the
 * communicator's progress thread (connect()): rank 0's event loop stays free to serve the TCP store the
 * others read the id from.
 */
async function startLibrary(backend: LibraryBackend, boot: Bootstrap, place: Place, topo: Topology, env: NodeJS.ProcessEnv, timeoutMs: number): Promise<NativeCommunicator> {
  const library = vendorLibrary(backend, env).path;
  const ids = () => Buffer.concat(Array.from({ length: LIBRARY_LANES[backend] }, () => native().libraryId(backend, library)));
  const mine = place.rank === 0 ? ids().toString("base64") : undefined;
  const id = Buffer.from(await boot.broadcast(`${backend}/id`, mine), "base64");
  // The device is the rank's index on its host, as the hosts say.
  const { localRank } = hostPlace(topo, place.rank);
  const comm = new (native().Communicator)({ backend, rank: place.rank, size: place.size, localRank, library, id });
  const init = backend === "nccl" ? "nccl: ncclCommInitRank" : "hccl: HcclCommInitRootInfo";
  try {
    await underDeadline(init, boot, place, timeoutMs, () => comm.connect());
    return comm;
  } catch (err) {
    if (!(err instanceof StartupTimeout)) comm.close();
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
  let topology: JobTopology;
  let warnings: string[];
  let secret = o.secret;
  try {
    if (boot.kind === "mpi") secret = await secretOverMpi(boot, o.place.rank);
    await agree(boot, o.place.rank, o.fingerprint);
    const met = await meet(boot, o.place);
    const topo = met.topo;
    // Once per job: rank 0 says it, the other ranks' lines would repeat it; a rank alone meets no one, so
    // its derived secret exposes nothing.
    const exposed = secret.source === "derived" && o.place.rank === 0 && o.place.size > 1;
    warnings = [...met.warnings, ...(exposed ? [DERIVED_SECRET_WARNING] : [])];
    topology = { ...topo };
    if (plan.backend === "nccl" || plan.backend === "hccl") {
      comm = await startLibrary(plan.backend, boot, o.place, topo, input.env, o.timeoutMs);
    } else if (plan.backend === "mpi") {
      // planStart pairs the mpi backend with the MPI bootstrap, on whose thread MPI was initialised.
      const { mpi, world } = boot as MpiBootstrap;
      comm = new (native().Communicator)({ backend: "mpi", rank: o.place.rank, size: o.place.size, mpi });
      backend += ` (MPI_THREAD_${world.threadLevel.toUpperCase()}, ${world.lanes} lane${world.lanes > 1 ? "s" : ""})`;
    } else {
      const chosen = plan.backend === "auto" ? byTopology(topo) : plan.backend;
      // Where a host's first rank is about to make its segment, it first clears what killed start-ups left there.
      const swept = chosen !== "tcp" && o.place.localRank === 0 ? sweptNote(sweepStaleSegments()) : "";
      if (swept) warnings.push(swept);
      comm =
        chosen === "shm"
          ? await startShm(boot, o.place, topo, met.sharesCores, input.env, secret)
          : await startTcp(boot, o.place, topo, { key: keyFor(secret, "tcp transport", fingerprintDigest(o.fingerprint)).toString("hex"), secret, iface: o.iface, shmWithinHosts: chosen === "shm+tcp", singleCopy: singleCopyAllowed(input.env), sharesCores: met.sharesCores });
      topology.links = linkCounts(topo, chosen !== "tcp");
      backend = `${comm.backend} on ${describeHosts(topo.hosts)}${comm.copyPath ? `, ${comm.copyPath}` : ""}`;
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
    topology,
    warnings,
    secret: secret.source,
    summary: `backend ${backend}, bootstrap ${boot.kind}`,
    close: async (failed = false) => {
      comm.close();
      await boot.close(failed);
    },
  };
}
