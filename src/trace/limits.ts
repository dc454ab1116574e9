// A trace is untrusted input (DESIGN.md, "Trace import"): what the importer takes from one is capped here, so
// that a hostile or broken file costs bounded time and memory and ends in one line (exit 2), never a crash.
import { MAX_WORLD } from "../config/job.js";
import { TraceError, quoted } from "./model.js";

/** Decompressed bytes read from one trace (or one archive, all its members together); --max-bytes raises it. */
export const DEFAULT_MAX_BYTES = 4 * 1024 ** 3;
/** One top-level value, node or event of a JSON trace (a node of a real trace is a few KiB). */
export const MAX_VALUE_BYTES = 64 * 1024 ** 2;
/** Nesting of a JSON trace (ET's deepest is some 8 levels: node, inputs, values, list of lists, tensor). */
export const MAX_DEPTH = 64;
/** World and process-group sizes: the job's own cap (config/job.ts), whoever counts the ranks. */
export { MAX_WORLD };
/** Elements of one tensor or one split (the job's own limit on a count). */
export const MAX_COUNT = 2 ** 40;
/** Collectives one rank's trace may hold (each becomes a stage, at most: a real step has hundreds). */
export const MAX_COLLECTIVES = 50_000;
/** Trace files read at once (folders and archives included). */
export const MAX_FILES = 65536;

/** "where": what a message names besides the file ("node 727 (record_param_comms)", "event at ts 123"). */
type Where = string;

/** A count from the trace: an integer in [0, MAX_COUNT], else exit 2 naming the file, where and which. */
export function count(value: unknown, file: string, where: Where, what: string): number {
  const n = typeof value === "string" && /^\s*-?\d+(\.\d+)?(e\d+)?\s*$/i.test(value) ? Number(value) : value;
  if (typeof n !== "number" || !Number.isInteger(n) || n < 0 || n > MAX_COUNT) {
    throw new TraceError(file, `${where}: ${what} is ${quoted(value)}, expected an integer from 0 to 2^40`);
  }
  return n;
}

/** A rank or group index from the trace: an integer in [0, MAX_WORLD). */
export function rankOf(value: unknown, file: string, where: Where, what: string): number {
  const n = typeof value === "string" && /^\s*\d+\s*$/.test(value) ? Number(value) : value;
  if (typeof n !== "number" || !Number.isInteger(n) || n < 0 || n >= MAX_WORLD) {
    throw new TraceError(file, `${where}: ${what} is ${quoted(value)}, expected an integer from 0 to ${MAX_WORLD - 1}`);
  }
  return n;
}

/** A world or group size: an integer in [1, MAX_WORLD]. */
export function sizeOf(value: unknown, file: string, where: Where, what: string): number {
  const n = typeof value === "string" && /^\s*\d+\s*$/.test(value) ? Number(value) : value;
  if (typeof n !== "number" || !Number.isInteger(n) || n < 1 || n > MAX_WORLD) {
    throw new TraceError(file, `${where}: ${what} is ${quoted(value)}, expected an integer from 1 to ${MAX_WORLD} (the importer's cap on world and group sizes)`);
  }
  return n;
}

/** The largest of a list, without spreading it into arguments (a trace controls the length). */
export function maxOf(values: Iterable<number>, empty = -Infinity): number {
  let m = empty;
  for (const v of values) if (v > m) m = v;
  return m;
}

export function minOf(values: Iterable<number>, empty = Infinity): number {
  let m = empty;
  for (const v of values) if (v < m) m = v;
  return m;
}

export function sumOf(values: Iterable<number>): number {
  let s = 0;
  for (const v of values) s += v;
  return s;
}

/** Distinct process groups one trace may name, and the ranks they hold together. */
export const MAX_GROUPS = 512;
export const MAX_GROUP_RANKS = 1 << 20;

/**
 * One trace's process groups, each made once: collectives of one group share its object (a trace of 100k
 * collectives on a group of 65536 ranks holds one list of them, not 100k), within the caps above.
 */
export class GroupTable {
  private readonly groups = new Map<string, { name: string; ranks: number[] }>();
  private ranks = 0;
  constructor(private readonly file: string) {}

  get(key: string, make: () => { name: string; ranks: number[] }): { name: string; ranks: number[] } {
    const known = this.groups.get(key);
    if (known) return known;
    const g = make();
    this.ranks += g.ranks.length;
    if (this.groups.size >= MAX_GROUPS) throw new TraceError(this.file, `more than ${MAX_GROUPS} distinct process groups (the importer's cap)`);
    if (this.ranks > MAX_GROUP_RANKS) throw new TraceError(this.file, `its distinct process groups hold more than ${MAX_GROUP_RANKS} ranks together (the importer's cap)`);
    this.groups.set(key, g);
    return g;
  }
}
