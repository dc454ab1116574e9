import { mkdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import winston from "winston";
import { native } from "../comm/native.js";
import { mpiNotBuiltNote, openCommunicator } from "../comm/open.js";
import type { Job } from "../config/job.js";
import { loadJob, loadRunConfig } from "../config/load.js";
import type { RunConfig } from "../config/run-config.js";
import { discoverPlace } from "../env/discover.js";
import { execute } from "../graph/execute.js";
import { validateAlgorithms, validateGraph } from "../graph/validate.js";
import { flightRecordText } from "../log/flight-record.js";
import { closeLogger, createLogger } from "../log/logger.js";
import { gatherUsage, startUsage } from "../metrics/usage.js";
import { averageBusBandwidth, type ResultDocument } from "../report/result.js";
import { formatCsv } from "../report/csv.js";
import { formatHtml } from "../report/html.js";
import { rankProgress } from "../report/progress.js";
import { formatSummary } from "../report/summary.js";
import { formatTable } from "../report/table.js";
import { writeFileAtomic } from "../report/write-atomic.js";
import { VERSION } from "../version.js";
import type { RunArgs } from "./commands/run.js";
import { fingerprint, jobToken } from "./identity.js";

/**
 * CLI flags override the run configuration, which overrides the job's own settings and defaults. The
 * deadline is the job's default for its stages; a stage's own timeoutSec still wins.
 */
function applyOverrides(job: Job, cfg: RunConfig, a: RunArgs): { job: Job; cfg: RunConfig } {
  return {
    job: {
      ...job,
      iterations: a.iterations ?? job.iterations,
      warmup: a.warmup ?? job.warmup,
      check: a.check ?? job.check,
      timeoutSec: a.timeout ?? cfg.timeoutSec ?? job.timeoutSec,
    },
    cfg: {
      ...cfg,
      backend: a.backend ?? cfg.backend,
      tcp: { ...cfg.tcp, iface: a.iface ?? cfg.tcp.iface },
      log: { ...cfg.log, level: a["log-level"] ?? (a.quiet ? "warn" : cfg.log.level), allRanks: a["log-all-ranks"] ?? cfg.log.allRanks },
      output: { ...cfg.output, dir: a.out ?? cfg.output.dir, json: a.json ?? cfg.output.json },
    },
  };
}

const FAULT_CODES = new Set(["ERR_SPMD_TIMEOUT", "ERR_SPMD_PEER_GONE", "ERR_SPMD_ABORTED"]);

function checkCount(name: string, v: number | undefined, min: number): void {
  if (v !== undefined && (!Number.isInteger(v) || v < min)) {
    throw Object.assign(new Error(`--${name}: expected an integer >= ${min}, got ${v}`), { exitCode: 2 });
  }
}

/** A new directory per run, never reusing one: `<out>/<job>-<UTC time>[-n]`. */
function createRunDir(outDir: string, jobName: string): string {
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  mkdirSync(outDir, { recursive: true });
  for (let n = 1; ; n++) {
    const dir = path.join(outDir, `${jobName}-${stamp}${n > 1 ? `-${n}` : ""}`);
    try {
      mkdirSync(dir);
      return dir;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
  }
}

/** Runs this process's rank of the job; returns the exit code (1 when any checked element is wrong). */
export async function runRank(args: RunArgs): Promise<number> {
  checkCount("iterations", args.iterations, 1);
  checkCount("warmup", args.warmup, 0);
  if (args.timeout !== undefined && !(args.timeout > 0)) {
    throw Object.assign(new Error(`--timeout: expected seconds > 0, got ${args.timeout}`), { exitCode: 2 });
  }
  const { job, cfg } = applyOverrides(loadJob(args.job), loadRunConfig(args.config), args);
  const place = discoverPlace(process.env);
  validateGraph(job, args.job, place.size, place.localSize);
  validateAlgorithms(job, args.job, cfg.backend);
  const log = createLogger({ rank: place.rank, level: cfg.log.level, allRanks: cfg.log.allRanks });
  const note = mpiNotBuiltNote(place, process.env, native().backends);
  if (note) log.warn(note);
  log.info(`job ${job.name}: rank ${place.rank} of ${place.size} (${place.launcher}), backend ${cfg.backend}`);

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
  log.debug(opened.summary);
  try {
    validateAlgorithms(job, args.job, opened.comm.backend);
  } catch (err) {
    await opened.close(true);
    throw err;
  }
  const release = () => opened.comm.release();
  // A signal (the launcher forwarding Ctrl-C, or SIGTERM after another rank failed) must not leak the
  // segment even in the short window before every rank has attached and rank 0 unlinked it.
  const onSignal = (signal: NodeJS.Signals) => {
    release();
    log.error(`stopped by ${signal}`);
    process.exit(128 + os.constants.signals[signal]);
  };
  const signals: NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP"];
  process.once("exit", release);
  signals.forEach((s) => process.on(s, onSignal));
  let failed = true;
  try {
    // Rank 0 names the run directory; every rank needs it for its log file.
    let runDir: string | undefined;
    if (place.rank === 0) runDir = createRunDir(cfg.output.dir, job.name);
    runDir = await opened.bootstrap.broadcast("run/dir", runDir);
    if (cfg.log.files && runDir) {
      log.add(new winston.transports.File({ filename: path.join(runDir, `rank${place.rank}.log.jsonl`), format: winston.format.json() }));
    }
    const usage = startUsage();
    const rows = await execute(job, opened.comm, {
      log,
      localSize: place.localSize,
      dumpDir: args["dump-dir"],
      progress: rankProgress(place.rank, args.quiet ?? false),
    }).catch((err: unknown) => {
      // A deadline, a dead peer or an abort: this rank's last ops say where the job stood.
      const record = FAULT_CODES.has((err as { code?: string }).code ?? "") ? flightRecordText(opened.comm) : undefined;
      if (record) log.error(record);
      throw err;
    });
    const ranks = await gatherUsage(opened.comm, usage(), job.timeoutSec);
    const wrong = rows.reduce((n, r) => n + (r.wrong ?? 0), 0);
    if (place.rank === 0) {
      const doc: ResultDocument = {
        version: VERSION,
        job: job.name,
        world_size: place.size,
        backend: opened.comm.backend,
        ...(opened.topology && { topology: opened.topology }),
        results: rows,
        average_bus_bandwidth: averageBusBandwidth(rows),
        ranks,
      };
      const table = formatTable(doc);
      const json = JSON.stringify(doc, null, 2) + "\n";
      writeFileAtomic(path.join(runDir!, "results.json"), json);
      writeFileAtomic(path.join(runDir!, "table.txt"), table);
      writeFileAtomic(path.join(runDir!, "results.csv"), formatCsv(doc));
      const summary = formatSummary(doc, job.iterations);
      writeFileAtomic(path.join(runDir!, "summary.txt"), summary);
      writeFileAtomic(path.join(runDir!, "report.html"), await formatHtml(doc, table, summary));
      if (cfg.output.json) writeFileAtomic(cfg.output.json, json);
      if (!args.quiet) process.stdout.write(table);
      log.info(`CPU seconds per rank over ${ranks[0]!.wall_s.toFixed(1)} s: ${ranks.map((u) => (u.cpu_user_s + u.cpu_system_s).toFixed(2)).join(" ")}`);
      log.info(`results in ${runDir}${cfg.output.json ? ` and ${cfg.output.json}` : ""}`);
    }
    if (wrong > 0) log.error(`${wrong} wrong elements`);
    failed = false;
    return wrong > 0 ? 1 : 0;
  } finally {
    process.off("exit", release);
    signals.forEach((s) => process.off(s, onSignal));
    await opened.close(failed);
    await closeLogger(log);
  }
}
