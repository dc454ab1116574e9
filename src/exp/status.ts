// What `exp plan` and `exp status` print: every point with its state (from the files), the exclusions, the
// stale points, and counts; `exp query`'s result in a table, CSV or JSON.
import { csvCell } from "../report/csv.js";
import { campaignActive, pointState, recordedPoints, stalePoints, type PointRecord, type PointState } from "./campaign.js";
import type { LoadedExperiment } from "./file.js";
import { describeParams, type Params, type Plan } from "./plan.js";

export interface PointStatus {
  point_id: string;
  params: Params;
  state: PointState;
  attempts: number;
  reps_done: number;
  repetitions: number;
  exit_code: number | null;
  log_tail: string | null;
  /** Repetitions marked done whose results.json is gone or changed since: they run again. */
  spoiled: number[];
  /** For a stale point: the recorded point it replaces. */
  replaces?: string;
}

export interface CampaignStatus {
  dir: string;
  counts: Record<PointState, number>;
  points: PointStatus[];
  excluded: Params[];
}

function fromRecord(dir: string, r: Pick<PointRecord, "id" | "params" | "attempts" | "repetitions">, active: boolean): PointStatus {
  const { state, markers } = pointState(dir, r, active);
  const failed = markers.filter((m) => m?.state === "failed").at(-1);
  return {
    point_id: r.id, params: r.params, state, attempts: r.attempts, reps_done: markers.filter((m) => m?.state === "done").length,
    repetitions: r.repetitions, exit_code: failed?.exit_code ?? (state === "done" ? 0 : null), log_tail: failed?.tail ?? null,
    spoiled: markers.flatMap((m, k) => (m?.state === "spoiled" ? [k + 1] : [])),
  };
}

/**
 * The campaign's points and their states. With the experiment's plan: its points (stale where the folder holds
 * an older point at the same coordinates); without: what the folder records.
 */
export function campaignStatus(dir: string, plan?: Plan, exp?: Pick<LoadedExperiment, "repetitions">): CampaignStatus {
  let points: PointStatus[];
  const active = campaignActive(dir);
  if (plan && exp) {
    const stale = stalePoints(dir, plan.points);
    const recorded = new Map(recordedPoints(dir).map((r) => [r.id, r]));
    points = plan.points.map((p) => {
      const old = stale.get(p.id);
      if (old) return { ...fromRecord(dir, old, false), point_id: p.id, state: "stale", replaces: old.id };
      return fromRecord(dir, { id: p.id, params: p.params, attempts: recorded.get(p.id)?.attempts ?? 0, repetitions: exp.repetitions }, active);
    });
  } else points = recordedPoints(dir).map((r) => fromRecord(dir, r, active));
  const counts: Record<PointState, number> = { pending: 0, running: 0, done: 0, failed: 0, stale: 0 };
  for (const p of points) counts[p.state]++;
  return { dir, counts, points, excluded: plan?.excluded ?? [] };
}

const countsLine = (c: Record<PointState, number>) =>
  Object.entries(c).filter(([, n]) => n > 0).map(([s, n]) => `${n} ${s}`).join(", ") || "no points";

/** One line per point: id, state, repetitions done, attempts, parameters; failures with their log tail. */
export function formatStatus(s: CampaignStatus, withTails: boolean): string {
  const out = [`# ${s.points.length} points in ${s.dir}: ${countsLine(s.counts)}`];
  for (const p of s.points) {
    const exit = p.exit_code !== null && p.state === "failed" ? ` exit ${p.exit_code}` : "";
    const replaces = p.replaces ? ` (replaces ${p.replaces})` : "";
    const spoiled = p.spoiled.length ? ` (spoiled: rep ${p.spoiled.join(", rep ")} marked done but its results.json is gone or changed; exp run runs it again)` : "";
    out.push(`${p.point_id}  ${p.state.padEnd(7)} ${`${p.reps_done}/${p.repetitions}`.padStart(5)} reps  ${String(p.attempts).padStart(2)} attempts  ${describeParams(p.params)}${exit}${replaces}${spoiled}`);
    if (withTails && p.state === "failed" && p.log_tail) out.push(...p.log_tail.split("\n").map((l) => `    | ${l}`));
  }
  for (const e of s.excluded) out.push(`excluded: ${describeParams(e)}`);
  return out.join("\n") + "\n";
}

export type QueryFormat = "table" | "csv" | "json";

/** Rows of a query as an aligned text table, CSV or JSON. */
export function formatRows(rows: Record<string, unknown>[], format: QueryFormat): string {
  if (format === "json") return JSON.stringify(rows, null, 2) + "\n";
  const columns = Object.keys(rows[0] ?? {});
  if (format === "csv") return [columns, ...rows.map((r) => columns.map((c) => r[c]))].map((r) => r.map(csvCell).join(",")).join("\n") + "\n";
  const cells = [columns, ...rows.map((r) => columns.map((c) => (r[c] === null || r[c] === undefined ? "" : String(r[c]))))];
  const widths = columns.map((_, i) => Math.max(...cells.map((r) => r[i]!.length)));
  return cells.map((r) => r.map((c, i) => c.padEnd(widths[i]!)).join("  ").trimEnd()).join("\n") + (rows.length ? "\n" : `(no rows)\n`);
}
