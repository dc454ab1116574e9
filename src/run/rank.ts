// One rank's run of a job, start to end: open (its place, from env/, and the communicator), execute (the job
// graph, whose steps loop in native code), gather (CPU and memory use, to every rank) and write (rank 0's
// reports). The CLI parses the command line and calls runRank.
import os from "node:os";
import path from "node:path";
import { native, type NativeErrorCode } from "../comm/native.js";
import { mpiNotBuiltNote, openCommunicator, type OpenCommunicator } from "../comm/open.js";
import { hostPlace, type Topology } from "../comm/topology.js";
import { deviceMemory } from "../comm/vendor-library.js";
import type { Job } from "../config/job.js";
import type { RunConfig } from "../config/run-config.js";
import { discoverPlace } from "../env/discover.js";
import { availableMemory } from "../env/memory.js";
import type { Place } from "../env/place.js";
import { execute } from "../graph/execute.js";
import { checkDeviceMemory, checkMemory, dumpBytes } from "../graph/memory-plan.js";
import { validateBackend, validateGraph } from "../graph/validate.js";
import { flightRecordText } from "../log/flight-record.js";
import { createLogger, type Logger } from "../log/logger.js";
import { averageBusBandwidth } from "../metrics/bandwidth.js";
import { describeMismatches } from "../metrics/mismatches.js";
import { gatherUsage, startUsage } from "../metrics/usage.js";
import { rankProgress } from "../report/progress.js";
import { formatTable } from "../report/table.js";
import type { RankUsage, ResultDocument, ResultRow } from "../results.js";
import { VERSION } from "../version.js";
import { fingerprint, jobToken } from "./identity.js";
import { gatherHosts, manifest, packageRevision } from "./manifest.js";
import { resolveRun, type RunRequest } from "./request.js";
import { osReason, prepareOutputPaths } from "./paths.js";
import { createRunDir, writeResults } from "./write.js";

/** Failures after which this rank's flight record says where the job stood. */
const FAULT_CODES = new Set<string>(["ERR_SPMD_TIMEOUT", "ERR_SPMD_PEER_GONE", "ERR_SPMD_ABORTED"] satisfies NativeErrorCode[]);

/** The communicator for `place`, once the backend it got is known to run every stage's algorithm. */
async function open(job: Job, file: string, cfg: RunConfig, place: Place): Promise<OpenCommunicator> {
  const opened = await openCommunicator({
    place,
    backend: cfg.backend,
    device: job.device,
    token: jobToken(job, place.size),
    fingerprint: fingerprint(job, cfg),
    timeoutMs: cfg.connectTimeoutSec * 1000,
    addr: cfg.rendezvous.addr,
    port: cfg.rendezvous.port,
    iface: cfg.tcp.iface,
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
 * short window before every rank has attached and rank 0 unlinked it.
 */
function releaseOnExit(opened: OpenCommunicator, log: Logger): () => void {
  const release = () => opened.comm.release();
  const onSignal = async (signal: NodeJS.Signals) => {
    release();
    log.error(`stopped by ${signal}`);
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

async function executeJob(job: Job, opened: OpenCommunicator, place: Place, r: RunRequest, log: Logger): Promise<ResultRow[]> {
  const progress = rankProgress(place.rank, r.quiet ?? false);
  try {
    const rows = await execute(job, opened.comm, {
      log, hostOf: opened.topology.hostOf, dumpDir: r.dumpDir, progress, samples: r.samples, solo: r.solo, links: hybridEverywhere(opened),
    });
    // The last ops of every lane, with their start and duration: where streams overlapped (debug only).
    if (log.isDebugEnabled()) log.debug(flightRecordText(opened.comm) ?? "flight record: empty");
    return rows;
  } catch (err) {
    // A deadline, a dead peer or an abort (the backend's message names who held the job up): this rank's
    // last ops, which say where the job stood.
    if (FAULT_CODES.has((err as { code?: string }).code ?? "")) log.error(flightRecordText(opened.comm) ?? "flight record: empty");
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
  log.info(`CPU seconds per rank over ${ranks[0]!.wall_s.toFixed(1)} s: ${ranks.map((u) => (u.cpu_user_s + u.cpu_system_s).toFixed(2)).join(" ")}`);
  log.info(`results in ${runDir}${cfg.output.json ? ` and ${cfg.output.json}` : ""}`);
}

/** The command line or a stage asks for .npy dumps (each output then also copied out). */
function wantsDumps(job: Job, r: RunRequest): boolean {
  return !!r.dumpDir || job.stages.some((s) => "dumpDir" in s && !!s.dumpDir);
}

/** The runner's settings as this run used them, for the manifest. */
function runSettings(job: Job, cfg: RunConfig): Record<string, unknown> {
  const { iterations, warmup, check, timeoutSec } = job;
  return { backend: cfg.backend, iterations, warmup, check, timeoutSec, connectTimeoutSec: cfg.connectTimeoutSec, iface: cfg.tcp.iface ?? null };
}

/** A rank's usage with where it ran: its host's name, the host's index and the rank's index there. */
function withHost(u: RankUsage, topo: Topology): RankUsage {
  const { node, localRank } = hostPlace(topo, u.rank);
  return { ...u, host: topo.hosts[node]!.name, node, local_rank: localRank };
}

/** Runs this process's rank of the job; returns the exit code (1 when any checked element is wrong). */
export async function runRank(r: RunRequest): Promise<number> {
  const { job, cfg } = resolveRun(r);
  const place = discoverPlace(process.env);
  validateGraph(job, r.job, place.size);
  validateBackend(job, r.job, cfg.backend, place.size);
  const memory = checkMemory(job, r.job, place, wantsDumps(job, r), availableMemory());
  // One device per rank of a node, the launcher's local rank's (the hosts say the same once the ranks meet).
  if (job.device !== "cpu") checkDeviceMemory(memory, r.job, `${job.device}:${place.localRank}`, deviceMemory(job.device, process.env, place.localRank));
  prepareOutputPaths(job, cfg.output, r.dumpDir, place, dumpBytes(memory));
  const log = createLogger({ rank: place.rank, level: cfg.log.level, allRanks: cfg.log.allRanks });
  const note = mpiNotBuiltNote(place, process.env, native().backends);
  if (note) log.warn(note);
  log.info(`job ${job.name}: rank ${place.rank} of ${place.size} (${place.launcher}), backend ${cfg.backend}`);
  if (place.rank === 0) packageRevision();
  const opened = await open(job, r.job, cfg, place);
  log.debug(opened.summary);
  for (const w of opened.warnings) log.warn(w);
  const restore = releaseOnExit(opened, log);
  let failed = true;
  try {
    const runDir = await runDirectory(opened, place, job, cfg, log);
    const hosts = await gatherHosts(opened.bootstrap);
    const usage = startUsage();
    const rows = await executeJob(job, opened, place, r, log);
    const ranks = await gatherUsage(opened.comm, usage(), job.timeoutSec);
    if (place.rank === 0) {
      const doc: ResultDocument = {
        version: VERSION, job: job.name, world_size: place.size, backend: opened.comm.backend,
        topology: { hosts: opened.topology.hosts, ...(opened.topology.links && { links: opened.topology.links }) },
        results: rows, average_bus_bandwidth: averageBusBandwidth(rows), ranks: ranks.map((u) => withHost(u, opened.topology)),
        manifest: manifest(opened.comm.backend, hosts, runSettings(job, cfg)),
        ...(job.source && { source: { format: job.source.format, schema: job.source.schema, files: job.source.files, world_size: job.source.worldSize } }),
      };
      await report(job, cfg, doc, runDir, r, log);
    }
    const wrong = rows.reduce((n, row) => n + (row.wrong ?? 0), 0);
    if (wrong > 0) {
      log.error(`${wrong} wrong elements`);
      for (const row of rows) for (const line of describeMismatches(row.stage, row.mismatches ?? [])) log.error(line);
    }
    failed = false;
    return wrong > 0 ? 1 : 0;
  } finally {
    restore();
    await opened.close(failed);
    await log.close();
  }
}
