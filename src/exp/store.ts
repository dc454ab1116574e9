// DIR/campaign.db, the SQLite index over the campaign's files that query, report and compare read. Only the
// controller writes it, and always as a whole from the files (one transaction), so it can never disagree with
// them for long and a lost or broken database costs nothing. Journal mode DELETE: WAL needs shared memory that
// NFS and Lustre, where campaigns live, do not give.
import { existsSync, rmSync } from "node:fs";
import path from "node:path";
import type BetterSqlite3 from "better-sqlite3";
import { readInputText } from "../config/read-input.js";
import { flatten } from "../report/csv.js";
import { checkOwnFile } from "../report/write-atomic.js";
import { coreRoundTrip, oversubscribed } from "../metrics/verdict.js";
import type { ResultDocument } from "../results.js";
import { campaignActive, pointState, recordedPoints, repDir, type CheckedMarker, type PointRecord, type PointState } from "./campaign.js";

export type Database = BetterSqlite3.Database;

export const DB_FILE = "campaign.db";

/** A point as the index has it. */
export interface PointRow {
  point_id: string;
  job: string;
  backend: string;
  world_size: number;
  hosts: number;
  variant: string;
  executor: string | null;
  params_json: string;
  state: PointState;
  attempts: number;
  reps_done: number;
  repetitions: number;
  exit_code: number | null;
  started: string | null;
  ended: string | null;
  log_tail: string | null;
  /** "3 ranks on 2 cores (vm)" where the point's ranks outnumbered a host's cores (metrics/verdict.ts). */
  oversubscribed: string | null;
}

const POINT_COLUMNS = "point_id TEXT PRIMARY KEY, job TEXT, backend TEXT, world_size INTEGER, hosts INTEGER, variant TEXT, executor TEXT, params_json TEXT, state TEXT, attempts INTEGER, reps_done INTEGER, repetitions INTEGER, exit_code INTEGER, started TEXT, ended TEXT, log_tail TEXT, oversubscribed TEXT";

/** The index's column for a flattened field: "params.bits" -> params_bits, so SQL needs no quoting. */
const column = (key: string) => key.replace(/[^A-Za-z0-9_]/g, "_");
const quote = (name: string) => `"${name.replace(/"/g, '""')}"`;

/** better-sqlite3 is loaded here only, by the controller: a rank never needs it. */
async function openDatabase(file: string, readonly = false): Promise<Database> {
  const [{ default: Sqlite }, { sqliteBinding }] = await Promise.all([import("better-sqlite3"), import("../build/sqlite.js")]);
  let db: Database;
  try {
    db = new Sqlite(file, { readonly, timeout: 10_000, nativeBinding: sqliteBinding() });
  } catch (err) {
    // Its compiled part is missing (npm held back its install script) or was built for another Node.
    if (!/bindings file|NODE_MODULE_VERSION|ERR_DLOPEN/.test(`${(err as Error).message} ${(err as NodeJS.ErrnoException).code}`)) throw err;
    throw Object.assign(new Error(`the SQLite addon (better-sqlite3) does not load: run \`runner build --sqlite\` (${(err as Error).message.split("\n")[0]})`), { exitCode: 2 });
  }
  if (!readonly) db.pragma("journal_mode = DELETE");
  return db;
}

function readDocument(file: string): ResultDocument | undefined {
  try {
    return JSON.parse(readInputText(file)) as ResultDocument;
  } catch {
    return undefined;
  }
}

interface Indexed {
  point: PointRow;
  rows: Map<string, unknown>[];
  env: [string, string][];
}

/** One point's files as the index's rows: its state, every result row of every finished repetition, its env. */
function indexPoint(dir: string, record: PointRecord, active: boolean): Indexed {
  const { state, markers } = pointState(dir, record, active);
  const done = markers.map((m, k) => [m, k + 1] as const).filter((e): e is readonly [CheckedMarker, number] => e[0]?.state === "done");
  const failed = markers.filter((m) => m?.state === "failed").at(-1);
  const rows: Map<string, unknown>[] = [];
  const env = new Map(Object.entries(record.env));
  let crowded: string | undefined;
  for (const [, rep] of done) {
    const doc = readDocument(path.join(repDir(dir, record.id, rep), "results.json"));
    crowded ??= doc && oversubscribed(doc);
    // What the launch's start-up found the machine to be rides on its rows: its copy path (metrics/verdict.ts,
    // startupApart) and its core round trip (judgeAlike). Only a string and a number are such (results files come
    // from anywhere); a stranger's object would not bind to a column.
    const roundTrip = coreRoundTrip(doc?.core_round_trip_ns);
    const launch: [string, unknown][] = [
      ...(typeof doc?.copy_path === "string" ? [["copy_path", doc.copy_path] as [string, unknown]] : []),
      ...(roundTrip !== undefined ? [["core_round_trip_ns", roundTrip] as [string, unknown]] : []),
    ];
    for (const r of doc?.results ?? []) rows.push(new Map<string, unknown>([["point_id", record.id], ["rep", rep], ...launch, ...flatten(r)]));
    for (const [k, v] of Object.entries(doc?.manifest?.env ?? {})) if (!env.has(k)) env.set(k, String(v));
  }
  const times = markers.filter((m): m is CheckedMarker => m !== undefined);
  const p = record.params;
  return {
    point: {
      point_id: record.id, job: p.job, backend: p.backend, world_size: p.world_size, hosts: p.hosts, variant: p.variant, executor: p.executor ?? null,
      params_json: JSON.stringify(p), state, attempts: record.attempts, reps_done: done.length, repetitions: record.repetitions,
      exit_code: failed?.exit_code ?? (state === "done" ? 0 : null),
      started: times.map((m) => m.started ?? m.ended).sort()[0] ?? null, ended: times.map((m) => m.ended).sort().at(-1) ?? null,
      log_tail: failed?.tail ?? null, oversubscribed: crowded ?? null,
    },
    rows,
    env: [...env],
  };
}

/** Errors of an index that cannot be used as it is (corrupt, truncated, not a database, someone else's). */
const unusable = (err: unknown) => {
  const code = (err as { code?: unknown }).code;
  return typeof code === "string" && code.startsWith("SQLITE_") && !/^SQLITE_(BUSY|LOCKED|FULL|READONLY|CANTOPEN|PERM|IOERR)/.test(code);
};

/** Writes every point's rows into `db`, replacing what it held, in one transaction. */
function rebuild(db: Database, indexed: Indexed[]): void {
  const columns = [...new Set(["point_id", "rep", ...indexed.flatMap((i) => i.rows.flatMap((r) => [...r.keys()]))].map(column))];
  // Anything but our three tables (and SQLite's own indexes) is another program's database, not to be overwritten in place.
  const foreign = db.prepare("SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' AND NOT (type = 'table' AND name IN ('points', 'rows', 'env'))").get() as { name: string } | undefined;
  if (foreign) throw Object.assign(new Error(`not this runner's index (it holds ${foreign.name})`), { code: "SQLITE_FOREIGN" });
  db.transaction(() => {
    db.exec(`DROP TABLE IF EXISTS points; DROP TABLE IF EXISTS rows; DROP TABLE IF EXISTS env;
      CREATE TABLE points (${POINT_COLUMNS});
      CREATE TABLE rows (${columns.map((c) => `${quote(c)}${c === "rep" ? " INTEGER" : ""}`).join(", ")});
      CREATE TABLE env (point_id TEXT, key TEXT, value TEXT);`);
    const point = db.prepare(`INSERT INTO points VALUES (${POINT_COLUMNS.split(", ").map((c) => `@${c.split(" ")[0]}`).join(", ")})`);
    const row = db.prepare(`INSERT INTO rows (${columns.map(quote).join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`);
    const env = db.prepare("INSERT INTO env VALUES (?, ?, ?)");
    for (const i of indexed) {
      point.run(i.point);
      for (const r of i.rows) {
        const cells = new Map([...r].map(([k, v]) => [column(k), typeof v === "boolean" ? Number(v) : v]));
        row.run(columns.map((c) => cells.get(c) ?? null));
      }
      for (const [k, v] of i.env) env.run(i.point.point_id, k, v);
    }
  })();
}

/**
 * Rebuilds the whole index from the folder's files, in one transaction; returns it open. An index SQLite
 * cannot use (corrupt, truncated, not a database, another program's) is deleted and made anew, saying so in
 * one line: the files are the truth. A full disk names the file.
 */
export async function syncStore(dir: string): Promise<Database> {
  const active = campaignActive(dir);
  const indexed = recordedPoints(dir).map((r) => indexPoint(dir, r, active));
  const file = path.join(dir, DB_FILE);
  // SQLite opens (and rolls back from the journal) whatever is at these names: a link or another user's file is refused.
  for (const f of [file, `${file}-journal`]) checkOwnFile(f);
  for (let fresh = false; ; fresh = true) {
    let db: Database | undefined;
    try {
      db = await openDatabase(file);
      rebuild(db, indexed);
      return db;
    } catch (err) {
      db?.close();
      if ((err as { code?: unknown }).code === "SQLITE_FULL") throw new Error(`${file}: ENOSPC, the disk is full (SQLite: ${(err as Error).message})`);
      if (fresh || !unusable(err)) throw err;
      process.stderr.write(`exp: ${file} could not be used (${(err as Error).message}); rebuilt from ${path.join(dir, "points")}\n`);
      for (const f of [file, `${file}-journal`]) rmSync(f, { force: true });
    }
  }
}

/** The index of a campaign folder, rebuilt from its files first; bad input when the folder holds no campaign. */
export async function openStore(dir: string): Promise<Database> {
  if (!existsSync(path.join(dir, "points"))) {
    throw Object.assign(new Error(`--dir ${dir}: no campaign there (no points/ folder; run \`runner exp run\` first)`), { exitCode: 2 });
  }
  return syncStore(dir);
}

/** One SQL statement over the campaign's index, read-only; a bad statement is bad input. */
export async function queryStore(dir: string, sql: string): Promise<Record<string, unknown>[]> {
  (await openStore(dir)).close();
  const db = await openDatabase(path.join(dir, DB_FILE), true);
  try {
    const statement = db.prepare(sql);
    if (!statement.reader) throw new Error("the database is read-only here: give a query that returns rows");
    return statement.all() as Record<string, unknown>[];
  } catch (err) {
    throw Object.assign(new Error(`exp query: ${(err as Error).message}`), { exitCode: 2 });
  } finally {
    db.close();
  }
}
