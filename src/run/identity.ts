// How the ranks of one run recognise each other: the token that admits a rank to the rendezvous, and the
// fingerprint the admitted ranks compare in the start-up agreement.
import { createHash } from "node:crypto";
import type { Fingerprint } from "../comm/agreement.js";
import type { Job } from "../config/job.js";
import type { RunConfig } from "../config/run-config.js";
import { VERSION } from "../version.js";

/**
 * Admits a rank to the rendezvous. The launcher gives each launch a fresh random one; ranks started by
 * hand derive it from what a stranger (another job on the same port) would not share: the job's name and
 * the world size. Ranks that get in compare everything else in the start-up agreement, which can say
 * what differs.
 */
export function jobToken(job: Pick<Job, "name">, size: number): string {
  const explicit = process.env.SPMD_RUNNER_TOKEN;
  if (explicit) return explicit;
  return createHash("sha256").update(JSON.stringify({ job: job.name, size })).digest("hex").slice(0, 32);
}

/** What every rank must share: the job as run (flags applied), the runner, the settings that shape the run. */
export function fingerprint(job: Job, cfg: RunConfig): Fingerprint {
  // Where the file says its schema lives is editor help, not part of the experiment.
  const { $schema: _schema, ...experiment } = job;
  return { version: VERSION, job: experiment, run: { backend: cfg.backend, connectTimeoutSec: cfg.connectTimeoutSec } };
}
