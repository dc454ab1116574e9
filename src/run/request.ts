// What one rank is asked to run: a job file, a run configuration and the command line's overrides, resolved
// into the job and configuration it runs with.
import type { Job } from "../config/job.js";
import { loadJob, loadRunConfig } from "../config/load.js";
import type { RunConfig } from "../config/run-config.js";

export interface RunRequest {
  job: string;
  config?: string;
  backend?: RunConfig["backend"];
  iface?: string;
  check?: boolean;
  iterations?: number;
  warmup?: number;
  /** Per-op deadline in seconds. */
  timeout?: number;
  out?: string;
  json?: string;
  dumpDir?: string;
  logLevel?: RunConfig["log"]["level"];
  logAllRanks?: boolean;
  quiet?: boolean;
  /** Keep every iteration's time in results.json. */
  samples?: boolean;
  /** Solo times of concurrent stages from a pass of the job's own warmup and iterations (graph.ts, soloProgram). */
  solo?: boolean;
}

/**
 * The job and configuration to run. The request's overrides win over the run configuration, which wins
 * over the job's own settings and defaults. The deadline is the job's default for its stages; a stage's own
 * timeoutSec still wins. The command line checked the numbers (cli/input.ts).
 */
export function resolveRun(r: RunRequest): { job: Job; cfg: RunConfig } {
  const job = loadJob(r.job), cfg = resolveConfig(r);
  return {
    job: {
      ...job,
      iterations: r.iterations ?? job.iterations,
      warmup: r.warmup ?? job.warmup,
      check: r.check ?? job.check,
      timeoutSec: r.timeout ?? cfg.timeoutSec ?? job.timeoutSec,
    },
    cfg,
  };
}

/** The run configuration (`--config`, else the defaults) with the request's overrides applied. */
export function resolveConfig(r: Omit<RunRequest, "job">): RunConfig {
  const cfg = loadRunConfig(r.config);
  return {
    ...cfg,
    backend: r.backend ?? cfg.backend,
    tcp: { ...cfg.tcp, iface: r.iface ?? cfg.tcp.iface },
    log: { ...cfg.log, level: r.logLevel ?? (r.quiet ? "warn" : cfg.log.level), allRanks: r.logAllRanks ?? cfg.log.allRanks },
    output: { ...cfg.output, dir: r.out ?? cfg.output.dir, json: r.json ?? cfg.output.json },
  };
}
