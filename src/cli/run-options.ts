import type { Options } from "yargs";
import type { RunRequest } from "../run/request.js";
import { integerAtLeast, positiveSeconds } from "./input.js";

export const BACKENDS = ["auto", "shm", "tcp", "shm+tcp", "mpi", "nccl", "hccl"] as const;
export const LOG_LEVELS = ["error", "warn", "info", "debug"] as const;

/** The options of `run`, which `launch` also accepts and forwards to every rank (DESIGN.md, Command line). */
export const RUN_OPTIONS = {
  config: { type: "string", requiresArg: true, describe: "Run configuration file (backend, timeouts, logs, output) (a regular file of at most 64 MiB; SPMD_RUNNER_MAX_INPUT=SIZE raises the cap)" },
  backend: { type: "string", choices: BACKENDS, describe: "Communication backend" },
  iface: {
    type: "string",
    requiresArg: true,
    describe: "tcp: interface to use (name prefixes like eth,ib; =eth0 exact; ^docker excluded) or an IP address",
  },
  check: { type: "boolean", describe: "Verify every element of every stage's result" },
  // No yargs type: a number type would read "abc" as NaN before the check could name what was given.
  iterations: { requiresArg: true, coerce: integerAtLeast("--iterations", 1), describe: "Timed steps per sweep point" },
  warmup: { requiresArg: true, coerce: integerAtLeast("--warmup", 0), describe: "Untimed steps before timing" },
  timeout: { requiresArg: true, coerce: positiveSeconds("--timeout"), describe: "Per-op deadline in seconds" },
  out: { type: "string", requiresArg: true, describe: "Directory for run directories (default: results)" },
  json: { type: "string", requiresArg: true, describe: "Also write the result JSON to this file" },
  "dump-dir": { type: "string", requiresArg: true, describe: "Each rank writes <dir>/<stage>/rank<r>.output.npy" },
  "log-level": { type: "string", choices: LOG_LEVELS, describe: "Log level" },
  "log-all-ranks": { type: "boolean", describe: "Log from every rank, not only rank 0" },
  quiet: { type: "boolean", describe: "No table or info logs on the console (result files are still written)" },
  samples: { type: "boolean", describe: "Keep every iteration's time (slowest rank's and each rank's) in results.json" },
  solo: {
    type: "boolean",
    describe: "Time concurrent streams' stages alone over the job's warmup and iterations (default: a short calibration pass)",
  },
} satisfies Record<string, Options>;

/** The run options as a RunRequest for `job`. */
export function runRequest(job: string, a: RunOptionArgs): RunRequest {
  return {
    job, config: a.config, backend: a.backend, iface: a.iface, check: a.check, iterations: a.iterations, warmup: a.warmup,
    timeout: a.timeout, out: a.out, json: a.json, dumpDir: a["dump-dir"], logLevel: a["log-level"], logAllRanks: a["log-all-ranks"],
    quiet: a.quiet, samples: a.samples, solo: a.solo,
  };
}

/** The options as yargs names them: the RunRequest's fields, the multi-word ones in kebab case. */
export type RunOptionArgs = Omit<RunRequest, "job" | "dumpDir" | "logLevel" | "logAllRanks"> & {
  "dump-dir"?: RunRequest["dumpDir"];
  "log-level"?: RunRequest["logLevel"];
  "log-all-ranks"?: RunRequest["logAllRanks"];
};
