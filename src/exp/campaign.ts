// The campaign folder, the truth every index is rebuilt from: DIR/points/<id>/point.json (what the point is),
// job.json (the job as run) and rep-<k>/ per repetition, with results.json, log.txt and marker.json, written
// when the repetition ends (by the controller, or by a batch job's trap). Stale points move to DIR/stale/.
import { existsSync, readdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import path from "node:path";
import { makeDirectory, writeFileAtomic } from "../report/write-atomic.js";
import { VERSION } from "../version.js";
import type { Params, Point } from "./plan.js";
import { activeJobs } from "./slurm.js";

export type PointState = "pending" | "running" | "done" | "failed" | "stale";

/** What point.json holds. */
export interface PointRecord {
  id: string;
  slot: string;
  params: Params;
  job_path: string;
  env: Record<string, string>;
  version: string;
  repetitions: number;
  /** Repetitions started, over every run of the campaign. */
  attempts: number;
}

/** What a repetition's marker.json holds. */
export interface Marker {
  state: "done" | "failed";
  exit_code: number;
  started?: string;
  ended: string;
  /** The last lines of the log, for failures. */
  tail?: string;
}

export const pointDir = (dir: string, id: string) => path.join(dir, "points", id);
export const repDir = (dir: string, id: string, rep: number) => path.join(pointDir(dir, id), `rep-${rep}`);

function readJson<T>(file: string): T | undefined {
  try {
    return JSON.parse(readFileSync(file, "utf8")) as T;
  } catch {
    return undefined; // absent, or cut short by a kill: as if never written
  }
}

export const readMarker = (dir: string, id: string, rep: number) => readJson<Marker>(path.join(repDir(dir, id, rep), "marker.json"));

export function writeMarker(dir: string, id: string, rep: number, marker: Marker): void {
  writeFileAtomic(path.join(repDir(dir, id, rep), "marker.json"), JSON.stringify(marker, null, 2) + "\n");
}

/** Every point the folder records, by id. */
export function recordedPoints(dir: string): PointRecord[] {
  const root = path.join(dir, "points");
  if (!existsSync(root)) return [];
  return readdirSync(root).flatMap((id) => readJson<PointRecord>(path.join(root, id, "point.json")) ?? []);
}

export function writePointRecord(dir: string, record: PointRecord): void {
  writeFileAtomic(path.join(pointDir(dir, record.id), "point.json"), JSON.stringify(record, null, 2) + "\n");
}

/** The record a point gets when it first runs, or the one it has. */
export function pointRecord(dir: string, point: Point, repetitions: number): PointRecord {
  const known = readJson<PointRecord>(path.join(pointDir(dir, point.id), "point.json"));
  return { id: point.id, slot: point.slot, params: point.params, job_path: point.jobPath, env: point.env, version: VERSION, repetitions, attempts: known?.attempts ?? 0 };
}

/** Makes the point's folder with its job, as the ranks will read it. */
export function preparePoint(dir: string, point: Point, record: PointRecord): string {
  makeDirectory(pointDir(dir, point.id));
  const jobFile = path.join(pointDir(dir, point.id), "job.json");
  writeFileAtomic(jobFile, point.jobText);
  writePointRecord(dir, record);
  return jobFile;
}

/** DIR/measures.json: what the campaign is compared on, so a folder compares as its experiment file would. */
export interface Measures {
  metrics: Record<string, "higher" | "lower">;
  tolerance: Record<string, number>;
}

const measuresFile = (dir: string) => path.join(dir, "measures.json");
export const writeMeasures = (dir: string, m: Measures) => writeFileAtomic(measuresFile(dir), JSON.stringify(m, null, 2) + "\n");
export const readMeasures = (dir: string) => readJson<Measures>(measuresFile(dir));

/** DIR/run.json while `exp run` works on the campaign: its pid, and the SLURM jobs it submitted. */
export interface RunRecord {
  pid: number;
  jobs: string[];
}

const runFile = (dir: string) => path.join(dir, "run.json");
export const writeRunRecord = (dir: string, r: RunRecord) => writeFileAtomic(runFile(dir), JSON.stringify(r) + "\n");
export const clearRunRecord = (dir: string) => rmSync(runFile(dir), { force: true });

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Whether repetitions of the campaign may be running now: its `exp run` lives, or SLURM still holds its jobs. */
export function campaignActive(dir: string): boolean {
  const r = readJson<RunRecord>(runFile(dir));
  return r !== undefined && (alive(r.pid) || activeJobs(r.jobs).length > 0);
}

/**
 * A point's state from its markers: done when every repetition is, failed when one failed, running while the
 * campaign is active and a repetition has started (it has a log) without ending.
 */
export function pointState(dir: string, record: Pick<PointRecord, "id" | "repetitions">, active = false): { state: PointState; markers: (Marker | undefined)[] } {
  const markers = Array.from({ length: record.repetitions }, (_, k) => readMarker(dir, record.id, k + 1));
  const started = (k: number) => markers[k] === undefined && existsSync(path.join(repDir(dir, record.id, k + 1), "log.txt"));
  const state = markers.every((m) => m?.state === "done") ? "done" : markers.some((m) => m?.state === "failed") ? "failed"
    : active && markers.some((_, k) => started(k)) ? "running" : "pending";
  return { state, markers };
}

/** Recorded points at a planned point's slot under another id: the job, parameters, env or runner changed since. */
export function stalePoints(dir: string, points: Point[]): Map<string, PointRecord> {
  const recorded = recordedPoints(dir);
  const stale = new Map<string, PointRecord>();
  for (const p of points) {
    const old = recorded.find((r) => r.slot === p.slot && r.id !== p.id);
    if (old) stale.set(p.id, old);
  }
  return stale;
}

/** Moves a stale point's files aside (DIR/stale/<id>-<time>), out of the index, kept for reference. */
export function setAside(dir: string, record: PointRecord): string {
  const to = path.join(dir, "stale", `${record.id}-${new Date().toISOString().replace(/[:.]/g, "-")}`);
  makeDirectory(path.dirname(to));
  renameSync(pointDir(dir, record.id), to);
  return to;
}
