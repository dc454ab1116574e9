// The campaign folder, the truth every index is rebuilt from: DIR/points/<id>/point.json (what the point is),
// job.json (the job as run) and rep-<k>/ per repetition, with results.json, log.txt and marker.json, written
// when the repetition ends (by the controller, or by a batch job's trap). Stale points move to DIR/stale/.
import { createHash } from "node:crypto";
import { closeSync, existsSync, linkSync, readdirSync, readFileSync, renameSync, rmSync, writeSync } from "node:fs";
import path from "node:path";
import { readInputFile, readInputText } from "../config/read-input.js";
import { checkOwnFile, createNewFile, makeDirectory, unguessable, writeFileAtomic } from "../report/write-atomic.js";
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
  /** Done: the sha-256 of results.json as the repetition left it, which a done repetition must still match. */
  results_sha256?: string;
}

/** A marker as read back: "spoiled" where it says done but its results file is gone or changed since. */
export type CheckedMarker = Omit<Marker, "state"> & { state: Marker["state"] | "spoiled" };

export const pointDir = (dir: string, id: string) => path.join(dir, "points", id);
export const repDir = (dir: string, id: string, rep: number) => path.join(pointDir(dir, id), `rep-${rep}`);

function readJson<T>(file: string): T | undefined {
  try {
    return JSON.parse(readInputText(file)) as T;
  } catch {
    return undefined; // absent, cut short by a kill, or not a file (a FIFO put there): as if never written
  }
}

const TAIL_LINES = 20;

/** The last lines of a repetition's log, or "" where it has none. */
export function logTail(file: string): string {
  try {
    return readFileSync(file, "utf8").trimEnd().split("\n").slice(-TAIL_LINES).join("\n");
  } catch {
    return "";
  }
}

/** The sha-256 of a repetition's results.json and whether it reads as results; undefined where it cannot be read. */
function readResults(rep: string): { sha256: string; parses: boolean } | undefined {
  let bytes: Buffer;
  try {
    bytes = readInputFile(path.join(rep, "results.json"));
  } catch {
    return undefined;
  }
  let parses: boolean;
  try {
    parses = Array.isArray((JSON.parse(bytes.toString("utf8")) as { results?: unknown }).results);
  } catch {
    parses = false;
  }
  return { sha256: createHash("sha256").update(bytes).digest("hex"), parses };
}

/**
 * A repetition's marker, checked against its results: a done one whose results.json is gone, changed or not
 * results any more is "spoiled", to run again (a marker from before the hash was kept needs only results that read).
 */
export function readMarker(dir: string, id: string, rep: number): CheckedMarker | undefined {
  const marker = readJson<Marker>(path.join(repDir(dir, id, rep), "marker.json"));
  if (marker?.state !== "done") return marker;
  const results = readResults(repDir(dir, id, rep));
  const intact = results !== undefined && (marker.results_sha256 === undefined ? results.parses : results.sha256 === marker.results_sha256);
  return intact ? marker : { ...marker, state: "spoiled" };
}

/**
 * Marks the repetition in `rep` ended with `exitCode`: done, with its results' hash, where it exited 0 and left
 * results that read; failed, with its log's tail, otherwise. The batch scripts' trap calls it too (slurm.ts).
 */
export function endRepetition(rep: string, exitCode: number, started?: string): Marker {
  const results = exitCode === 0 ? readResults(rep) : undefined;
  const ended = new Date().toISOString();
  const marker: Marker = results?.parses
    ? { state: "done", exit_code: 0, started, ended, results_sha256: results.sha256 }
    : { state: "failed", exit_code: exitCode, started, ended, tail: exitCode === 0 ? `exited 0 without results that read (${path.join(rep, "results.json")})` : logTail(path.join(rep, "log.txt")) };
  writeFileAtomic(path.join(rep, "marker.json"), JSON.stringify(marker, null, 2) + "\n");
  return marker;
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

/**
 * DIR/run.json, the campaign's lock while `exp run` works on it: created with O_EXCL (only one of two runs
 * started together gets it), owned by a pid and that process's start time (a pid reused by another process
 * does not hold it), with the repetition's process group running now and the SLURM jobs it submitted.
 */
export interface RunRecord {
  pid: number;
  /** The owner's start time as the kernel has it (/proc/PID/stat), where the system says. */
  started?: string;
  /** The running repetition's process group (launcher and ranks), while one runs, and its leader's start time. */
  group?: { id: number; started?: string };
  jobs: string[];
}

const runFile = (dir: string) => path.join(dir, "run.json");
export const writeRunRecord = (dir: string, r: RunRecord) => writeFileAtomic(runFile(dir), JSON.stringify(r) + "\n");
export const clearRunRecord = (dir: string) => rmSync(runFile(dir), { force: true });

/** A process's start time (field 22 of /proc/PID/stat, after the command's parenthesis), or undefined. */
export function processStart(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Whether the record's owner still runs: its pid lives, and is the same process (same start time). */
const ownerAlive = (r: RunRecord) => alive(r.pid) && (r.started === undefined || processStart(r.pid) === r.started);

/** Whether repetitions of the campaign may be running now: its `exp run` lives, or SLURM still holds its jobs. */
export function campaignActive(dir: string): boolean {
  const r = readJson<RunRecord>(runFile(dir));
  return r !== undefined && (ownerAlive(r) || activeJobs(r.jobs).length > 0);
}

const busy = (message: string) => Object.assign(new Error(message), { exitCode: 2 });

/**
 * Fills the lock just created; where the write fails (a full disk: ENOSPC, which names no file) the empty
 * lock is removed, so that no later run takes it for a dead one, and the error names it.
 */
function writeLock(fd: number, file: string, record: RunRecord): void {
  try {
    writeSync(fd, JSON.stringify(record) + "\n");
  } catch (err) {
    rmSync(file, { force: true });
    const e = err as NodeJS.ErrnoException;
    throw Object.assign(e, { path: file, message: `${e.message} (${file})` });
  } finally {
    closeSync(fd);
  }
}

/**
 * Takes the campaign's lock for this process, or refuses (exit 2) naming the run that holds it. A lock whose
 * owner is gone is taken over, `say`ing so; its repetition's process group, if any still runs, is killed
 * first, so that nothing runs beside the repetitions about to start.
 */
export function lockCampaign(dir: string, say: (line: string) => void): RunRecord {
  makeDirectory(dir);
  const mine: RunRecord = { pid: process.pid, started: processStart(process.pid), jobs: [] };
  for (let tries = 0; ; tries++) {
    // Read back below, so it must be ours: a link or another user's file there is refused, not followed.
    checkOwnFile(runFile(dir));
    try {
      const fd = createNewFile(runFile(dir));
      writeLock(fd, runFile(dir), mine);
      return mine;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      if (tries > 0) throw busy(`--dir ${dir}: another exp run took the lock at the same time (${runFile(dir)})`);
    }
    const held = readJson<RunRecord>(runFile(dir));
    if (held && ownerAlive(held)) throw busy(`--dir ${dir}: exp run pid ${held.pid} is working on this campaign (${runFile(dir)})`);
    if (held && activeJobs(held.jobs).length) throw busy(`--dir ${dir}: SLURM still runs this campaign's job${held.jobs.length === 1 ? "" : "s"} ${held.jobs.join(", ")} (scancel them, or wait)`);
    if (held?.group !== undefined) killGroup(held.group);
    if (!setAsideStale(dir, held)) throw busy(`--dir ${dir}: another exp run took the lock at the same time (${runFile(dir)})`);
    say(`exp: taking over the lock of exp run pid ${held?.pid ?? "?"}, which is no longer running (${runFile(dir)})`);
  }
}

/**
 * Moves the stale lock out of the way, atomically (rename), and checks that what moved is the lock judged
 * stale: another run taking over at the same time may have replaced it with its own fresh one, which is put
 * back (link: never over a third). False when the lock was not the stale one.
 */
function setAsideStale(dir: string, stale: RunRecord | undefined): boolean {
  const aside = unguessable(runFile(dir), ".stale");
  try {
    renameSync(runFile(dir), aside);
  } catch {
    return true; // gone already: whoever removed it left the way free for O_EXCL to decide
  }
  const moved = readJson<RunRecord>(aside);
  const same = JSON.stringify(moved) === JSON.stringify(stale);
  if (!same) {
    try {
      linkSync(aside, runFile(dir));
    } catch {
      // a third run holds the lock now
    }
  }
  rmSync(aside, { force: true });
  return same;
}

/**
 * SIGKILL to a dead controller's repetition's process group, where any of it may still run: not where the id
 * now leads another process (started at another time).
 */
function killGroup(group: NonNullable<RunRecord["group"]>): void {
  const leader = processStart(group.id);
  if (leader !== undefined && leader !== group.started) return;
  try {
    process.kill(-group.id, "SIGKILL");
  } catch {
    // ESRCH: the watchdog already took it down
  }
}

/**
 * A point's state from its markers: done when every repetition is, failed when one failed, running while the
 * campaign is active and a repetition has started (it has a log) without ending.
 */
export function pointState(dir: string, record: Pick<PointRecord, "id" | "repetitions">, active = false): { state: PointState; markers: (CheckedMarker | undefined)[] } {
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
