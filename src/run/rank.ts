// One rank's run of a job, start to end: open (its place, from env/, and the communicator), execute (the job
// graph, whose steps loop in native code), gather (CPU and memory use, to every rank) and write (rank 0's
// reports). The CLI parses the command line and calls runRank.
import { existsSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { native, type NativeErrorCode } from "../comm/native.js";
import { mpichCrowdedNote, mpiNotBuiltNote, openCommunicator, planStart, type OpenCommunicator } from "../comm/open.js";
import { listenPlan } from "../comm/tcp-address.js";
import { hostPlaces, type HostPlace, type Topology } from "../comm/topology.js";
import { checkLibrary } from "../comm/vendor-library.js";
import type { Job } from "../config/job.js";
import type { RunConfig } from "../config/run-config.js";
import { discoverPlace, LAUNCHER_PID_ENV, rankForMessages } from "../env/discover.js";
import type { Place } from "../env/place.js";
import { execute, type ExecuteOptions } from "../graph/execute.js";
import { checkPlaceMemory, dumpBytes, type MemoryPlan } from "../graph/memory-plan.js";
import { sweepPoints, type SweepPoint } from "../graph/sweep.js";
import { validateBackend, validateGraph } from "../graph/validate.js";
import { sayFailure } from "../log/failure.js";
import { flightEntries, flightRecordText, formatFlightEntry, inFlight, recordText } from "../log/flight-record.js";
import { createLogger, type Logger } from "../log/logger.js";
import { averageBusBandwidth } from "../metrics/bandwidth.js";
import { describeMismatches } from "../metrics/mismatches.js";
import { gatherUsage, startUsage } from "../metrics/usage.js";
import { rankProgress, tellRunDir } from "../report/progress.js";
import { formatTable } from "../report/table.js";
import { makeDirectory, osReason, writeFileAtomic } from "../report/write-atomic.js";
import type { RankUsage, ResultDocument, ResultRow } from "../results.js";
import { VERSION } from "../version.js";
import { fingerprint, jobSecret } from "./identity.js";
import { interruptedAt, Journal, removeJournal } from "./journal.js";
import { firstLine, gatherHosts, manifest, packageRevision, startupFacts } from "./manifest.js";
import { resolveRun, type RunRequest } from "./request.js";
import { prepareOutputPaths } from "./paths.js";
import { createRunDir, writeResults } from "./write.js";

/** In the run directory: each failed rank's flight record, rank<r>.txt. */
const FLIGHT_DIR = "flight";

/** Failures after which this rank's flight record says where the job stood. */
const FAULT_CODES = new Set<string>(["ERR_SPMD_TIMEOUT", "ERR_SPMD_PEER_GONE", "ERR_SPMD_ABORTED"] satisfies NativeErrorCode[]);

/** The communicator for `place`, once the backend it got is known to run every stage's algorithm. */
async function open(job: Job, file: string, cfg: RunConfig, place: Place, log: Logger): Promise<OpenCommunicator> {
  const opened = await openCommunicator({
    place,
    backend: cfg.backend,
    device: job.device,
    secret: jobSecret(job, place.size),
    fingerprint: fingerprint(job, cfg),
    timeoutMs: cfg.connectTimeoutSec * 1000,
    addr: cfg.rendezvous.addr,
    port: cfg.rendezvous.port,
    iface: cfg.tcp.iface,
    debug: (line) => log.debug(line),
  });
  try {
    validateBackend(job, file, opened.comm.backend, place.size);
  } catch (err) {
    await opened.close(true);
    throw err;
  }
  try {
    // `split` groups with the hosts the ranks found, before the job's first collective. Every rank read the
    // same topology, so all stop here alike, and rank 0 keeps the store up until each has left.
    validateGraph(job, file, place.size, opened.topology.hostOf);
  } catch (err) {
    await opened.close(false);
    throw err;
  }
  return opened;
}

/**
 * Until the returned function is called, a signal (the launcher forwarding Ctrl-C, or SIGTERM after another
 * rank failed) or an exit drops the communicator's names first: the shm segment must not leak even in the
 * short window before every rank has attached and rank 0 unlinked it. A signal then runs `onInterrupt`
 * (rank 0 writes what finished) before the rank exits.
 */
function releaseOnExit(opened: OpenCommunicator, log: Logger, onInterrupt: (signal: NodeJS.Signals) => Promise<void>): () => void {
  const release = () => opened.comm.release();
  let stopping = false;
  const onSignal = async (signal: NodeJS.Signals) => {
    // A second Ctrl-C while the finished points are written is the same request.
    if (stopping) return;
    stopping = true;
    release();
    log.error(`stopped by ${signal}`);
    try {
      await onInterrupt(signal);
    } catch (err) {
      log.error((err as Error).message);
    }
    await log.close();
    process.exit(128 + os.constants.signals[signal]);
  };
  const signals: NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP"];
  process.once("exit", release);
  signals.forEach((s) => process.on(s, onSignal));
  return () => {
    process.off("exit", release);
    signals.forEach((s) => process.off(s, onSignal));
  };
}

/** Rank 0 names the run directory; every rank learns it, for its log file. */
async function runDirectory(opened: OpenCommunicator, place: Place, job: Job, cfg: RunConfig, log: Logger): Promise<string> {
  const runDir = await opened.bootstrap.broadcast("run/dir", place.rank === 0 ? createRunDir(cfg.output.dir, job.name) : undefined);
  if (cfg.log.files && runDir) {
    await log.addFile(path.join(runDir, `rank${place.rank}.log.jsonl`));
  }
  return runDir!;
}

/**
 * shm within hosts and tcp between, with every rank sharing its host with another: then each rank's transport
 * counts bytes and time per link class (a rank alone on its host has plain tcp and no counters). Decided from
 * the topology, the same on every rank, as the collective that adds the counters up needs.
 */
function hybridEverywhere(opened: OpenCommunicator): boolean {
  const { links, hosts } = opened.topology;
  return !!links && links.shm > 0 && links.tcp > 0 && hosts.every((h) => h.ranks.length > 1);
}

/**
 * After a fault, this rank's whole flight record goes to <runDir>/flight/rank<r>.txt (and to the log at debug
 * level), and the error carries the ops that were in flight and that folder: printed after the cause
 * (cli/index.ts), not a page of ops before it.
 */
function attachFlightRecord(err: Error & { details?: string[] }, comm: OpenCommunicator["comm"], runDir: string, rank: number, log: Logger): void {
  const entries = flightEntries(comm);
  if (entries.length === 0) return;
  const text = recordText(entries);
  log.debug(text);
  const dir = path.join(runDir, FLIGHT_DIR);
  try {
    makeDirectory(dir);
    writeFileAtomic(path.join(dir, `rank${rank}.txt`), `${text}\n`);
  } catch (writeErr) {
    log.error(`${text}\n(not written to ${dir}: ${osReason(writeErr)})`);
    return;
  }
  err.details = [...inFlight(entries).map((e) => `in flight: ${formatFlightEntry(e)}`), `flight records: ${dir}${path.sep}`];
}

async function executeJob(
  job: Job, opened: OpenCommunicator, place: Place, r: RunRequest, log: Logger, onPoint: ExecuteOptions["onPoint"], runDir: string,
): Promise<ResultRow[]> {
  const progress = rankProgress(place.rank, r.quiet ?? false);
  try {
    const rows = await execute(job, opened.comm, {
      log, hostOf: opened.topology.hostOf, dumpDir: r.dumpDir, progress, samples: r.samples, solo: r.solo, links: hybridEverywhere(opened), onPoint,
    });
    // The last ops of every lane, with their start and duration: where streams overlapped (debug only).
    if (log.isDebugEnabled()) log.debug(flightRecordText(opened.comm) ?? "flight record: empty");
    return rows;
  } catch (err) {
    // A deadline, a dead peer or an abort (the backend's message names who held the job up): this rank's
    // last ops, which say where the job stood.
    if (FAULT_CODES.has((err as { code?: string }).code ?? "")) attachFlightRecord(err as Error, opened.comm, runDir, place.rank, log);
    throw err;
  }
}

/** Rank 0's part: the result document, written to the run directory, and the table on the console. */
async function report(job: Job, cfg: RunConfig, doc: ResultDocument, runDir: string, r: RunRequest, log: Logger): Promise<void> {
  // The table reaches the console even when the disk refuses the files (ENOSPC after a long run).
  const table = formatTable(doc);
  if (!r.quiet) process.stdout.write(table);
  try {
    await writeResults(doc, table, runDir, cfg.output, job.iterations);
  } catch (err) {
    const where = cfg.output.json ? `${runDir} and ${cfg.output.json}` : runDir;
    throw new Error(`the results could not be written to ${where}: ${osReason(err)}`);
  }
  const ranks = doc.ranks ?? [];
  if (ranks.length) log.info(`CPU seconds per rank over ${ranks[0]!.wall_s.toFixed(1)} s: ${ranks.map((u) => (u.cpu_user_s + u.cpu_system_s).toFixed(2)).join(" ")}`);
  log.info(`results in ${runDir}${cfg.output.json ? ` and ${cfg.output.json}` : ""}`);
}

/** How far a run got: what rank 0 writes when a signal or a fault stops it. */
interface SoFar {
  runDir?: string;
  hosts?: Awaited<ReturnType<typeof gatherHosts>>;
  finished: SweepPoint[];
  rows: ResultRow[];
  /** Rank 0's: each finished point on disk, for whoever finishes results.json. */
  journal?: Journal;
  /** `runner launch` was told the run directory: it finishes results.json from the journal if a rank dies. */
  launcherFinishes?: boolean;
}

/**
 * A run stopped by a signal or a fault keeps the sweep points that finished, marked as interrupted in every
 * report (the other ranks are stopping too, so nothing more is gathered: no per-rank usage). Where none
 * finished, the run directory goes: it would hold nothing but logs of a run that measured nothing. Under
 * `runner launch` the journal stays for the launcher, which names the culprit where a rank died.
 */
async function reportInterrupted(
  job: Job, cfg: RunConfig, r: RunRequest, log: Logger, sofar: SoFar, ended: { by: string; signal?: NodeJS.Signals },
  document: (rows: ResultRow[], more: Partial<ResultDocument>) => ResultDocument,
): Promise<void> {
  if (!sofar.runDir) return;
  sofar.journal?.close();
  if (!sofar.launcherFinishes) removeJournal(sofar.runDir);
  if (sofar.finished.length === 0) {
    // Another rank's fault, which stopped this one, left its flight record there.
    if (existsSync(path.join(sofar.runDir, FLIGHT_DIR))) return;
    rmSync(sofar.runDir, { recursive: true, force: true });
    return;
  }
  const interrupted = interruptedAt(ended.by, sofar.finished.length, sweepPoints(job), ended.signal);
  await report(job, cfg, document(sofar.rows, { interrupted }), sofar.runDir, r, log);
}

/** The runner's settings as this run used them, for the manifest. */
function runSettings(job: Job, cfg: RunConfig): Record<string, unknown> {
  const { iterations, warmup, check, timeoutSec } = job;
  return { backend: cfg.backend, iterations, warmup, check, timeoutSec, connectTimeoutSec: cfg.connectTimeoutSec, iface: cfg.tcp.iface ?? null };
}

/** A rank's usage with where it ran: its host's name, the host's index and the rank's index there. */
function withHost(u: RankUsage, { node, localRank }: HostPlace, hosts: Topology["hosts"]): RankUsage {
  return { ...u, host: hosts[node]!.name, node, local_rank: localRank };
}

/**
 * A rank started by a launcher ends when the launcher does, even by SIGKILL, which it cannot forward: the
 * kernel sends SIGTERM at the parent's death (PR_SET_PDEATHSIG), which stops the rank as Ctrl-C would
 * (rank 0 keeps the finished points). Asked of the kernel, not watched from JS (the end of a pipe from
 * `runner launch`): a rank's parent is mpirun, Hydra's proxy or slurmstepd just as well, none of which gives
 * it such a pipe, and the kernel's signal comes whatever the JS thread is doing. A rank started from a shell
 * (no launcher, or torchrun-style variables set by hand) keeps running as `nohup` or `&` asked.
 */
function endWithLauncher(place: Place): void {
  if (place.launcher === "none" || place.launcher === "torchrun") return;
  const parent = Number(process.env[LAUNCHER_PID_ENV]) || process.ppid;
  if (!native().endWithParent(os.constants.signals.SIGTERM, parent)) {
    throw new Error(`the launcher (pid ${parent}) ended before this rank started`);
  }
}

/**
 * What every rank checks before the ranks meet: the job, the flags, the graph and the backend for `world`'s
 * size, and the memory its ranks on this host need. `runner launch` checks the same before it starts any
 * rank, so that bad input is said once, not by every rank.
 */
export function checkRun(r: RunRequest, place: Pick<Place, "size" | "localSize" | "localRank">): { job: Job; cfg: RunConfig; memory: MemoryPlan } {
  const { job, cfg } = resolveRun(r);
  validateGraph(job, r.job, place.size);
  validateBackend(job, r.job, cfg.backend, place.size);
  return { job, cfg, memory: checkPlaceMemory(job, r.job, place, r.dumpDir).plan };
}

/**
 * checkRun for `runner launch`'s `nprocs` local ranks, and what else it can tell before starting any (the
 * README promises the flags are checked first): that the backend starts under it (mpi needs an MPI launcher,
 * nccl and hccl their library), that --iface names an interface here, and that --out and --json can be
 * written. Each rank said these itself, 2-4 lines, and a nccl rank's end reached the others as "connection
 * ... lost".
 */
export function checkLaunch(r: RunRequest, nprocs: number): void {
  const place: Place = { rank: 0, size: nprocs, localRank: 0, localSize: nprocs, launcher: "runner launch", master: { addr: "127.0.0.1", port: 0 } };
  const { job, cfg, memory } = checkRun(r, place);
  const plan = planStart({ requested: cfg.backend, place, env: process.env, built: native().backends, master: place.master!, device: job.device });
  if (plan.backend === "nccl" || plan.backend === "hccl") checkLibrary(plan.backend, process.env);
  if (cfg.tcp.iface !== undefined) listenPlan(cfg.tcp.iface);
  prepareOutputPaths(job, cfg.output, r.dumpDir, place, dumpBytes(memory));
}

/** Runs this process's rank of the job; returns the exit code (1 when any checked element is wrong). */
export async function runRank(r: RunRequest): Promise<number> {
  const place = discoverPlace(process.env);
  endWithLauncher(place);
  const { job, cfg, memory } = checkRun(r, place);
  prepareOutputPaths(job, cfg.output, r.dumpDir, place, dumpBytes(memory));
  const log = createLogger({ rank: place.rank, level: cfg.log.level, allRanks: cfg.log.allRanks });
  const note = mpiNotBuiltNote(place, process.env, native().backends);
  if (note) log.warn(note);
  log.info(`job ${job.name}: rank ${place.rank} of ${place.size} (${place.launcher}), backend ${cfg.backend}`);
  if (place.rank === 0) packageRevision();
  const opened = await open(job, r.job, cfg, place, log);
  log.debug(opened.summary);
  for (const w of opened.warnings) log.warn(w);
  const crowded = place.rank === 0 ? mpichCrowdedNote(opened.comm.backend, native().mpiLibrary, place.localSize, os.availableParallelism()) : undefined;
  if (crowded) log.warn(crowded);
  const sofar: SoFar = { finished: [], rows: [] };
  const document = (rows: ResultRow[], more: Partial<ResultDocument>): ResultDocument => ({
    version: VERSION, job: job.name, world_size: place.size, backend: opened.comm.backend,
    topology: { hosts: opened.topology.hosts, ...(opened.topology.links && { links: opened.topology.links }) },
    ...startupFacts(opened.comm),
    results: rows, average_bus_bandwidth: averageBusBandwidth(rows), ...more,
    manifest: manifest(opened.comm.backend, sofar.hosts ?? [], runSettings(job, cfg), opened.secret),
    ...(job.source && { source: { format: job.source.format, schema: job.source.schema, files: job.source.files, world_size: job.source.worldSize } }),
  });
  const restore = releaseOnExit(opened, log, async (signal) => {
    if (place.rank === 0) await reportInterrupted(job, cfg, r, log, sofar, { by: signal, signal }, document);
  });
  let failed = true;
  try {
    const runDir = (sofar.runDir = await runDirectory(opened, place, job, cfg, log));
    sofar.hosts = await gatherHosts(opened.bootstrap);
    if (place.rank === 0) {
      sofar.launcherFinishes = tellRunDir(runDir);
      const head = { document: document([], {}), output: cfg.output, iterations: job.iterations, points: sweepPoints(job) };
      sofar.journal = new Journal(runDir, head, (line) => log.warn(line));
    }
    const usage = startUsage();
    const rows = await executeJob(job, opened, place, r, log, (point, done) => {
      sofar.finished.push(point);
      sofar.rows.push(...done);
      sofar.journal?.append(point, done);
    }, runDir);
    const ranks = await gatherUsage(opened.comm, usage(), job.timeoutSec);
    if (place.rank === 0) {
      const places = hostPlaces(opened.topology);
      await report(job, cfg, document(rows, { ranks: ranks.map((u) => withHost(u, places[u.rank]!, opened.topology.hosts)) }), runDir, r, log);
      sofar.journal?.close();
      removeJournal(runDir);
    }
    const wrong = rows.reduce((n, row) => n + (row.wrong ?? 0), 0);
    if (wrong > 0) {
      log.error(`${wrong} wrong elements`);
      for (const row of rows) for (const line of describeMismatches(row.stage, row.mismatches ?? [])) log.error(line);
    }
    failed = false;
    return wrong > 0 ? 1 : 0;
  } catch (err) {
    // Said before closing: the launcher stops the other ranks 2 s after the first one failed, and a close
    // slowed by a loaded machine would otherwise end under its SIGTERM with the cause unsaid.
    sayFailure(err, rankForMessages(process.env));
    // Without `runner launch` (mpirun, srun), rank 0 keeps what finished itself, naming the fault it met.
    if (place.rank === 0 && !sofar.launcherFinishes && sofar.journal) {
      await reportInterrupted(job, cfg, r, log, sofar, { by: `the fault rank 0 met (${firstLine((err as Error).message)})` }, document).catch((e: Error) => log.error(e.message));
    }
    throw err;
  } finally {
    restore();
    sofar.journal?.close();
    await opened.close(failed);
    await log.close();
  }
}
