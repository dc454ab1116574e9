// Nothing finished is lost (DESIGN.md, "Errors and faults"): rank 0 appends each sweep point's rows to
// <runDir>/journal.jsonl as the point ends, so that whatever ends the run (a signal, a rank that dies or stops
// answering, rank 0 itself killed) results.json can be finished with every point that finished: by rank 0,
// or by `runner launch`, which outlives every rank. Once results.json is whole the journal goes.
import { closeSync, constants, existsSync, fdatasyncSync, openSync, readFileSync, rmSync, writeSync } from "node:fs";
import path from "node:path";
import type { RunConfig } from "../config/run-config.js";
import type { SweepPoint } from "../graph/sweep.js";
import { averageBusBandwidth } from "../metrics/bandwidth.js";
import { formatTable } from "../report/table.js";
import { createNewFile, osReason } from "../report/write-atomic.js";
import type { Interrupted, ResultDocument, ResultRow } from "../results.js";
import { writeResults } from "./write.js";

const JOURNAL = "journal.jsonl";

/** The journal's first line: the document without rows, and what finishing it needs. */
interface Head {
  document: ResultDocument;
  output: RunConfig["output"];
  iterations: number;
  /** Every sweep point in the order they run. */
  points: SweepPoint[];
}

/** Each further line: one finished point and its rows. */
interface Entry {
  point: SweepPoint;
  rows: ResultRow[];
}

export class Journal {
  /** Undefined once closed, or dropped after a failed write. */
  private file: string | undefined;
  /** Written with the first point: until one finishes there is nothing to keep, and no file. */
  private head: Head | undefined;

  /**
   * A journal in `runDir` (made by this run: no one else's file to follow or reuse). Each finished point is
   * appended by an open, a write, an fdatasync and a close: no descriptor stays open between points (the
   * soak counts them). A journal that cannot be written (a full disk) is said once to `warn` and dropped:
   * the run goes on, and its end writes results.json as before.
   */
  constructor(runDir: string, head: Head, private readonly warn: (line: string) => void) {
    this.file = path.join(runDir, JOURNAL);
    this.head = head;
  }

  /** A finished point's rows, on disk before the next point starts. */
  append(point: SweepPoint, rows: ResultRow[]): void {
    if (this.file === undefined) return;
    const lines = [...(this.head ? [this.head] : []), { point, rows } satisfies Entry].map((v) => `${JSON.stringify(v)}\n`);
    let fd: number | undefined;
    try {
      fd = this.head ? createNewFile(this.file, 0o600) : openSync(this.file, constants.O_WRONLY | constants.O_APPEND | constants.O_NOFOLLOW);
      writeSync(fd, lines.join(""));
      fdatasyncSync(fd);
      this.head = undefined;
    } catch (err) {
      this.warn(`the finished points are not journalled (${this.file}: ${osReason(err)}): a fault loses them`);
      this.file = undefined;
    } finally {
      if (fd !== undefined) closeSync(fd);
    }
  }

  /** Once closed (the run ended, or a signal is finishing it), what still finishes is not written. */
  close(): void {
    this.file = undefined;
  }
}

/** The journal in `runDir`: its head and the points that finished, or undefined where there is none to read. */
function readJournal(runDir: string): { head: Head; entries: Entry[] } | undefined {
  let text: string;
  try {
    text = readFileSync(path.join(runDir, JOURNAL), "utf8");
  } catch {
    return undefined;
  }
  // A line cut short by the death it records is a point that did not finish.
  const lines = text.split("\n").slice(0, -1).map((l) => JSON.parse(l) as unknown);
  if (lines.length === 0) return undefined;
  return { head: lines[0] as Head, entries: lines.slice(1) as Entry[] };
}

/** What `interrupted` says of a run of `points` that `by` ended after the first `finished` of them. */
export function interruptedAt(by: string, finished: number, points: readonly SweepPoint[], signal?: string): Interrupted {
  const point = ({ count, params }: SweepPoint) => ({ ...(count !== undefined && { count }), params });
  const during = points[finished];
  return { by, ...(signal && { signal }), finished: points.slice(0, finished).map(point), ...(during && { during: point(during) }), sweep_points: points.length };
}

/**
 * `runner launch`'s part, once every rank has ended: results.json (and every other report) from the journal,
 * with the finished points and `by`, the rank that died or stopped answering; the table to stdout unless
 * `quiet` or rank 0 printed one. Nothing where no point finished. The journal goes either way.
 */
async function finishFromJournal(runDir: string, by: string, quiet: boolean): Promise<void> {
  const journal = readJournal(runDir);
  if (!journal || journal.entries.length === 0) return removeJournal(runDir);
  const { head, entries } = journal;
  const rows = entries.flatMap((e) => e.rows);
  const interrupted = interruptedAt(by, entries.length, head.points);
  const doc: ResultDocument = { ...head.document, results: rows, average_bus_bandwidth: averageBusBandwidth(rows), interrupted };
  const table = formatTable(doc);
  // Rank 0, stopped by the launcher's SIGTERM after the culprit, printed the finished points already.
  if (!quiet && !existsSync(path.join(runDir, "results.json"))) process.stdout.write(table);
  await writeResults(doc, table, runDir, head.output, head.iterations);
  removeJournal(runDir);
}

/** The journal of a run that ended whole: results.json holds it all. */
export function removeJournal(runDir: string): void {
  rmSync(path.join(runDir, JOURNAL), { force: true });
}

/**
 * What `runner launch` does with rank 0's run directory once every rank has ended: where `by` names a rank
 * that died or stopped answering, results.json with the points that finished; else (a whole run, or a signal,
 * after which rank 0 wrote it) only the journal goes. A line saying why, where that fails.
 */
export async function finishLaunch(runDir: string, by: string | undefined, quiet: boolean): Promise<string | undefined> {
  try {
    if (by === undefined) removeJournal(runDir);
    else await finishFromJournal(runDir, by, quiet);
    return undefined;
  } catch (err) {
    return `runner launch: the finished sweep points could not be written to ${runDir}: ${osReason(err)}`;
  }
}
