// The job's secret: what every connection between its ranks proves it knows (the store's handshake, the tcp
// transport's Hello, the shm segment's tag), and never sends (DESIGN.md, "Security").
import { createHash, createHmac, randomBytes } from "node:crypto";
import type { SecretSource } from "../results.js";
import type { Bootstrap } from "./bootstrap.js";
import type { Fingerprint } from "./agreement.js";

export interface JobSecret {
  readonly value: string;
  readonly source: SecretSource;
}

/** The one line rank 0 logs when the job runs on a derived secret: what is exposed, and what to set. */
export const DERIVED_SECRET_WARNING =
  "no SPMD_RUNNER_TOKEN and no MPI launcher: this job's secret is derived from its name and size, so another user on " +
  "these hosts can join its rendezvous, read and write its store and pose as a rank on its tcp links; set " +
  "SPMD_RUNNER_TOKEN to the same random value on every rank, e.g. $(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n')";

/** A fresh secret, as `runner launch` and rank 0 under an MPI launcher draw one. */
export function drawSecret(): string {
  return randomBytes(32).toString("hex");
}

/** Under an MPI launcher: rank 0 draws the secret and MPI carries it to every rank, before any socket opens. */
export async function secretOverMpi(boot: Bootstrap, rank: number): Promise<JobSecret> {
  return { value: await boot.broadcast("secret", rank === 0 ? drawSecret() : undefined), source: "mpi" };
}

/**
 * The secret's key for one use (`purpose`), so that no two uses (store, tcp lanes, shm) share a key, bound to
 * whatever else must match (`bound`: the agreed job's fingerprint digest).
 */
export function keyFor(secret: JobSecret, purpose: string, ...bound: Buffer[]): Buffer {
  const mac = createHmac("sha256", secret.value).update(`spmd-runner ${purpose}\0`);
  for (const b of bound) mac.update(b);
  return mac.digest();
}

/** What proves the shm segment `name` is the job's: its creator writes it in the header, the others check it. */
export function segmentTag(secret: JobSecret, name: string): string {
  return keyFor(secret, "shm segment", Buffer.from(name)).toString("hex");
}

/** The agreed job (every rank's fingerprint equals rank 0's once `agree` returned), as 32 bytes a key binds. */
export function fingerprintDigest(fp: Fingerprint): Buffer {
  return createHash("sha256").update(JSON.stringify(fp)).digest();
}
