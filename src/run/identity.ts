// How the ranks of one run recognise each other: the secret every connection between them proves, and the
// fingerprint the admitted ranks compare in the start-up agreement.
import { createHash } from "node:crypto";
import type { Fingerprint } from "../comm/agreement.js";
import type { JobSecret } from "../comm/secret.js";
import type { Job } from "../config/job.js";
import type { RunConfig } from "../config/run-config.js";
import { LAUNCHER_PID_ENV } from "../env/discover.js";
import { VERSION } from "../version.js";

/**
 * The job's secret as the ranks know it before they meet (under an MPI launcher openCommunicator draws a
 * random one instead): SPMD_RUNNER_TOKEN, which `runner launch` draws afresh per launch ("random") and the
 * project's sbatch scripts set from /dev/urandom ("env"); else one derived from the job's name and the world
 * size, which anyone who knows those can compute ("derived": rank 0 warns, comm/secret.ts).
 */
export function jobSecret(job: Pick<Job, "name">, size: number, env: NodeJS.ProcessEnv = process.env): JobSecret {
  const explicit = env.SPMD_RUNNER_TOKEN;
  if (explicit) return { value: explicit, source: env[LAUNCHER_PID_ENV] ? "random" : "env" };
  return { value: createHash("sha256").update(JSON.stringify({ job: job.name, size })).digest("hex").slice(0, 32), source: "derived" };
}

/** What every rank must share: the job as run (flags applied), the runner, the settings that shape the run. */
export function fingerprint(job: Job, cfg: RunConfig): Fingerprint {
  // Where the file says its schema lives is editor help, not part of the experiment.
  const { $schema: _schema, ...experiment } = job;
  return { version: VERSION, job: experiment, run: { backend: cfg.backend, connectTimeoutSec: cfg.connectTimeoutSec } };
}
