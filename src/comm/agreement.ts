// Start-up agreement: before any rank communicates for the job, the ranks check that they run the same
// job, run configuration and runner version. Rank 0's fingerprint goes to every rank, each rank says how
// its own differs, and every rank learns every answer, so all stop together with the same message naming
// the rank that differs and where ("rank 2's job differs from rank 0's: stages[1].reduce is ...").
import { describeValue, formatJsonPath } from "../config/errors.js";
import type { Bootstrap } from "./bootstrap.js";

/** What ranks of one job must share. Each part is plain JSON. */
export interface Fingerprint {
  version: string;
  job: unknown;
  /** The parts of the run configuration every rank must agree on (not where rank 0 writes its files). */
  run: unknown;
}

const PART_NAMES: Record<keyof Fingerprint, string> = { version: "runner version", job: "job", run: "run configuration" };

/** Ranks disagree: bad input (exit code 2), found before the job's first op. */
export class AgreementError extends Error {
  readonly exitCode = 2;
}

interface Difference {
  path: PropertyKey[];
  mine: unknown;
  theirs: unknown;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The first place two JSON values differ, depth first in key order; undefined when they are equal. */
export function firstDifference(mine: unknown, theirs: unknown, path: PropertyKey[] = []): Difference | undefined {
  if (Array.isArray(mine) && Array.isArray(theirs)) {
    for (let i = 0; i < Math.max(mine.length, theirs.length); i++) {
      const d = firstDifference(mine[i], theirs[i], [...path, i]);
      if (d) return d;
    }
    return undefined;
  }
  if (isObject(mine) && isObject(theirs)) {
    const keys = [...new Set([...Object.keys(mine), ...Object.keys(theirs)])].sort();
    for (const key of keys) {
      const d = firstDifference(mine[key], theirs[key], [...path, key]);
      if (d) return d;
    }
    return undefined;
  }
  return Object.is(mine, theirs) ? undefined : { path, mine, theirs };
}

function shown(v: unknown): string {
  return v === undefined ? "missing" : describeValue(v);
}

/** How rank `rank`'s fingerprint differs from rank 0's, or "" when it does not. */
export function describeDifference(rank: number, mine: Fingerprint, reference: Fingerprint): string {
  for (const part of Object.keys(PART_NAMES) as (keyof Fingerprint)[]) {
    const d = firstDifference(mine[part], reference[part]);
    if (!d) continue;
    const where = d.path.length ? `${formatJsonPath(d.path)} is ` : "";
    return `rank ${rank}'s ${PART_NAMES[part]} differs from rank 0's: ${where}${shown(d.mine)} vs ${shown(d.theirs)}`;
  }
  return "";
}

/** Collective over the bootstrap: resolves when every rank's fingerprint equals rank 0's, else throws on every rank. */
export async function agree(boot: Bootstrap, rank: number, mine: Fingerprint): Promise<void> {
  const text = await boot.broadcast("agree/fingerprint", rank === 0 ? JSON.stringify(mine) : undefined);
  const reference = JSON.parse(text) as Fingerprint;
  // Through JSON as rank 0's went, so only real differences count (undefined fields, -0).
  const own = JSON.parse(JSON.stringify(mine)) as Fingerprint;
  const answers = await boot.allGather("agree/difference", describeDifference(rank, own, reference));
  const differing = answers.filter((a) => a !== "");
  if (differing.length === 0) return;
  const others = differing.length > 1 ? ` (and ${differing.length - 1} more rank${differing.length > 2 ? "s" : ""} differ)` : "";
  throw new AgreementError(`start-up: ${differing[0]}${others}; every rank must run the same job, configuration and runner version`);
}
