import * as z from "zod";
import { ConfigError, configErrorFromZod } from "../config/errors.js";
import { readInputText } from "../config/read-input.js";
import { apartRepetitions, coreRoundTrip, describeAparts, describeInterval, describeMachines, judgeAlike, machinesNote, median, MIN_REPS, oversubscribed, oversubscribedNote, repetitionValue, sideMachines, unsteadyNote } from "../metrics/verdict.js";
import type { ResultDocument } from "../results.js";
import { stageCell } from "./table.js";

// Only what comparing needs; other fields (and later additions) pass through untouched. The iterations'
// spread (min, max) is optional: result files without it still compare.
const rowSchema = z.looseObject({
  stage: z.string(),
  op: z.string(),
  count: z.number(),
  size: z.number(),
  type: z.string().nullable(),
  redop: z.string().nullable(),
  root: z.number().nullable(),
  time: z.looseObject({ avg_us: z.number(), p50_us: z.number().optional(), min_us: z.number().optional(), max_us: z.number().optional() }),
  busbw: z.number(),
  wrong: z.number().nullable(),
  params: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])).optional(),
});
const documentSchema = z.looseObject({ job: z.string(), world_size: z.number(), results: z.array(rowSchema), manifest: z.unknown().optional() });
type Row = z.output<typeof rowSchema>;
export type ResultsFile = z.output<typeof documentSchema>;

/** One run: its rows and its launch's core round trip (metrics/verdict.ts, coreRoundTrip). */
export interface Run {
  rows: Row[];
  roundTrip?: number;
}

export const runOf = (d: ResultsFile): Run => ({ rows: d.results, roundTrip: coreRoundTrip(d.core_round_trip_ns) });

/** A row of one run, with that run's core round trip. */
interface Entry {
  row: Row;
  roundTrip?: number;
}

export function loadResults(file: string): ResultsFile {
  const text = readInputText(file);
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    throw new ConfigError(file, "", "not a JSON result file");
  }
  if (typeof data === "object" && data !== null && "stages" in data && !("results" in data)) {
    throw new ConfigError(file, "", "a job file, not results: give the results.json of a run (results/<job>-<time>/results.json)");
  }
  const parsed = documentSchema.safeParse(data);
  if (!parsed.success) throw configErrorFromZod(file, parsed.error);
  return parsed.data;
}

/** Refuses, in one line, runs of different jobs or world sizes: their rows do not match up. */
export function checkComparable(files: string[], docs: ResultsFile[]): void {
  const what = (d: ResultsFile) => `job "${d.job}" on ${d.world_size} rank${d.world_size === 1 ? "" : "s"}`;
  const other = docs.findIndex((d) => what(d) !== what(docs[0]!));
  if (other < 0) return;
  throw new ConfigError(files[other]!, "", `${what(docs[other]!)}, but ${files[0]} is ${what(docs[0]!)}: compare runs of one job at one world size`);
}

/** One side of a row, medians over its runs. */
export interface Medians {
  /** What the verdict is taken on (speed): busbw at each run's fastest iteration, or its rate for rows that move no bytes. */
  speed: number;
  /** Each run's mean time: context only, the verdict never reads it. */
  mean_us: number;
}

export interface Comparison {
  key: string;
  /** The row as the first run holding it has it (stage, op, count). */
  row: Row;
  before?: Medians;
  after?: Medians;
  /** after.speed / before.speed: > 1 is faster. */
  ratio?: number;
  /** With MIN_REPS runs or more on each side: the change's interval across runs (metrics/verdict.ts). */
  interval?: [number, number];
  regression: string | undefined;
  /** Slower beyond the threshold, but not beyond the noise: why not. */
  noise?: string;
  /**
   * With fewer than MIN_REPS runs a side: slower beyond the floor with every iteration slower, which the same
   * job still shows against itself when the machine's load changes between two runs (a lane of CI's tests
   * beside them: 43% on a 1 MiB allreduce). Marked, never a regression: only runs a side can say it is one.
   */
  suspect?: string;
  /** The sides' runs measured no machine in common (judgeAlike): how far apart each side's cores were. */
  machine?: string;
}

// A parameter sweep's points are rows of their own (`ar[algorithm=tree]`), as in the table.
const keyOf = (r: Row) => `${stageCell(r)} ${r.op} ${r.count} ${r.type ?? "-"} ${r.redop ?? "-"} ${r.root ?? "-"}`;

/** Higher is faster: busbw, or the rate of rows that move no bytes; at the run's median iteration (metrics/verdict.ts). */
const speed = (r: Row) => {
  const field = (name: string) => (name === "busbw" ? r.busbw : r.time[name]);
  return r.size > 0 ? repetitionValue("busbw", field)! : 1 / repetitionValue("time.avg_us", field)!;
};

/**
 * With fewer than MIN_REPS runs a side, a row must be at least this much slower to count: less than a
 * machine's drift between runs where each run's iterations are tight (docs/DESIGN.md, "Comparing runs").
 */
export const NOISE_FLOOR = 0.2;

const medians = (rows: Row[]): Medians => ({ speed: median(rows.map(speed)), mean_us: median(rows.map((r) => r.time.avg_us)) });

/** How far one side's runs of a row differ: 1 − slowest/fastest (0 for one run). */
const spreadOf = (rows: Row[]) => 1 - Math.min(...rows.map(speed)) / Math.max(...rows.map(speed));

/**
 * Why a slowdown seen in fewer than MIN_REPS runs a side is not one, or undefined when it is. It must exceed
 * the noise floor: NOISE_FLOOR, or how far the runs of either side differ where it has two. And every
 * iteration of the second side must be slower than every iteration of the first: on a busy machine a run's
 * slow iterations reach what another run shows (quick start back to back, 56 pairs: rows up to 5.5 times
 * slower, none with the iterations apart).
 */
function fewRunsNoise(b: Row[], a: Row[], ratio: number): string | undefined {
  const floor = Math.max(NOISE_FLOOR, spreadOf(b), spreadOf(a));
  if (ratio >= 1 - floor) return `under the ${(floor * 100).toFixed(0)}% noise floor of so few runs`;
  const fastest = Math.min(...a.map((r) => r.time.min_us ?? Infinity));
  const slowest = Math.max(...b.map((r) => r.time.max_us ?? -Infinity));
  if (fastest <= slowest) return `iterations overlap: B's fastest ${fastest.toFixed(1)} us, A's slowest ${slowest.toFixed(1)} us`;
  return undefined;
}

/** "cores 49 ns apart in A's runs, 320 ns in B's" where the sides' runs share no machine (machines), else undefined. */
function machineDiffered(b: Entry[], a: Entry[]): string | undefined {
  const sides = sideMachines(b.map((e) => e.roundTrip), a.map((e) => e.roundTrip));
  if (!sides || sides.shared.length) return undefined;
  const ns = (side: Entry[]) => median(side.flatMap((e) => (e.roundTrip === undefined ? [] : [e.roundTrip]))).toFixed(0);
  return `cores ${ns(b)} ns apart in A's runs, ${ns(a)} ns in B's`;
}

/** One row over every run of both sides (each list holds the row from each run that has it). */
function compareRow(key: string, before: Entry[], after: Entry[], threshold: number): Comparison {
  const [b, a] = [before.map((e) => e.row), after.map((e) => e.row)];
  if (!a.length) return { key, row: b[0]!, before: medians(b), regression: "missing in the second run" };
  const [earlier, later] = [medians(b), medians(a)];
  // The ratio of the very values the table prints beside the verdict.
  const ratio = later.speed / earlier.speed;
  const wrong = a.reduce((n, r) => n + (r.wrong ?? 0), 0);
  const base = { key, row: b[0]!, before: earlier, after: later, ratio };
  if (wrong > 0) return { ...base, regression: `${wrong} wrong elements` };
  if (!(Number.isFinite(ratio) && ratio < 1 - threshold)) return { ...base, regression: undefined };
  const slower = `${((1 - ratio) * 100).toFixed(1)}% slower`;
  const machine = machineDiffered(before, after);
  if (machine) return { ...base, regression: undefined, machine };
  if (a.length < MIN_REPS || b.length < MIN_REPS) {
    const noise = fewRunsNoise(b, a, ratio);
    return noise ? { ...base, regression: undefined, noise } : { ...base, regression: undefined, suspect: slower };
  }
  // Slower only when the change's whole interval is beyond the threshold (it holds across the runs), like
  // machine with like where the runs measured more than one.
  const measured = (side: Entry[]) => side.map((e) => ({ value: speed(e.row), roundTrip: e.roundTrip }));
  const { interval, verdict, alike } = judgeAlike(measured(before), measured(after), "higher", threshold);
  const range = interval ? describeInterval(interval) : alike ? "judged on the runs of a machine both sides measured" : "";
  return verdict === "regression" ? { ...base, interval, regression: `${slower}${alike ? " over all runs" : ""} (${range})` } : { ...base, interval, regression: undefined, noise: range };
}

/**
 * Rows matched by stage and shape over the runs of each side; a slowdown beyond `threshold` (a fraction)
 * that also exceeds the noise, wrong elements or a missing row regress.
 */
export function compareRuns(before: Run[], after: Run[], threshold: number): Comparison[] {
  const group = (runs: Run[]) => {
    const m = new Map<string, Entry[]>();
    for (const { rows, roundTrip } of runs) for (const row of rows) m.set(keyOf(row), [...(m.get(keyOf(row)) ?? []), { row, roundTrip }]);
    return m;
  };
  const earlier = group(before), later = group(after);
  const out = [...earlier].map(([key, b]) => compareRow(key, b, later.get(key) ?? [], threshold));
  for (const [key, a] of later) if (!earlier.has(key)) out.push({ key, row: a[0]!.row, after: medians(a.map((e) => e.row)), regression: undefined });
  return out;
}

/** "path: A -> B" for every leaf of two manifests that differs (hosts compared as a whole). */
export function manifestDifferences(a: unknown, b: unknown, at = "manifest"): string[] {
  const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
  if (isObject(a) && isObject(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
    return keys.flatMap((k) => manifestDifferences(a[k], b[k], `${at}.${k}`));
  }
  const show = (v: unknown) => (v === undefined ? "(absent)" : JSON.stringify(v));
  return JSON.stringify(a) === JSON.stringify(b) ? [] : [`${at}: ${show(a)} -> ${show(b)}`];
}

/** The table's first lines: how many runs each side had, and what that allows. */
function runsNote(runs: [number, number]): string[] {
  const n = (k: number) => `${k} run${k === 1 ? "" : "s"}`;
  const lines = [
    `# A: ${n(runs[0])}, B: ${n(runs[1])}; the verdict is taken on each run's fastest iteration: "fastest A" and "fastest B" are each side's median over its runs`,
    `#   of busbw at that iteration (GB/s; iterations a second for rows that move no bytes), B/A = fastest B / fastest A (> 1 is faster);`,
    `#   "mean us" (each run's mean time, median over runs) and its A/B are context only`,
  ];
  if (Math.min(...runs) < MIN_REPS) {
    lines.push(`# fewer than ${MIN_REPS} runs a side: run-to-run noise cannot be measured, so no row is a regression for being slower;`,
      `#   "slower?" marks one whose iterations are all slower, beyond a ${NOISE_FLOOR * 100}% floor (give ${MIN_REPS} or more runs a side: A1 A2 A3 -- B1 B2 B3)`);
  }
  return lines;
}

/** One line where runs' ranks outnumbered a host's cores (metrics/verdict.ts), naming the first such run. */
export function crowdedRuns(files: string[], docs: ResultsFile[]): string[] {
  const crowded = docs.flatMap((d, i) => {
    const what = oversubscribed(d as Pick<ResultDocument, "topology" | "manifest">);
    return what ? [[files[i]!, what] as const] : [];
  });
  if (!crowded.length) return [];
  const [file, what] = crowded[0]!;
  return [oversubscribedNote(crowded.length > 1 ? `${file} and ${crowded.length - 1} more run${crowded.length > 2 ? "s" : ""}` : file, what)];
}

/** One line per side whose runs ran apart from each other in most rows (metrics/verdict.ts, apartRepetitions). */
export function unsteadyRuns(side: string, files: string[], docs: ResultsFile[]): string[] {
  const byKey = docs.map((d) => new Map(d.results.map((r) => [keyOf(r), r])));
  const keys = [...new Set(byKey.flatMap((m) => [...m.keys()]))];
  const table = keys.map((k) => byKey.map((m) => {
    const r = m.get(k);
    return r && repetitionValue("time.avg_us", (name) => r.time[name]);
  }));
  const apart = apartRepetitions(table);
  const copyPaths = docs.map((d) => d.copy_path);
  const roundTrips = docs.map((d) => coreRoundTrip(d.core_round_trip_ns));
  return apart.length ? [unsteadyNote(`side ${side}`, describeAparts(apart, (i) => files[i]!, copyPaths, roundTrips))] : [];
}

/** One line where the runs' launches measured more than one machine (metrics/verdict.ts, describeMachines). */
export function machineRuns(before: ResultsFile[], after: ResultsFile[]): string[] {
  const trips = (docs: ResultsFile[]) => docs.map((d) => coreRoundTrip(d.core_round_trip_ns)).filter((t) => t !== undefined);
  const what = describeMachines([["A", trips(before)], ["B", trips(after)]]);
  return what ? [machinesNote(what)] : [];
}

/** The table, with `notes` (OVERSUBSCRIBED, UNSTEADY, MACHINES) above the count. */
export function formatComparison(rows: Comparison[], threshold: number, runs: [number, number], differences: string[] = [], notes: string[] = []): string {
  const cell = (v: number | undefined, d = 2) => (v === undefined || !Number.isFinite(v) ? "-" : v.toFixed(d));
  // A rate (1/us) is printed a second, so that B/A is still the ratio of the printed values.
  const fastest = (r: Row, m: Medians | undefined) => (m && r.size <= 0 ? `${cell(m.speed * 1e6, 0)}/s` : cell(m?.speed));
  const lines = [
    ...(differences.length ? ["# the runs differ in their manifests:", ...differences.map((d) => `#   ${d}`)] : []),
    ...runsNote(runs),
    `# ${"stage".padEnd(16)} ${"op".padEnd(14)} ${"count".padStart(12)} ${"mean us A".padStart(10)} ${"mean us B".padStart(10)} ${"A/B".padStart(6)} ${"fastest A".padStart(10)} ${"fastest B".padStart(10)} ${"B/A".padStart(6)}  verdict`,
    ...rows.map((c) => {
      const r = c.row;
      const verdict = c.regression ? `REGRESSION: ${c.regression}` : c.machine ? `machine differed (${c.machine})` : c.suspect ? `slower? ${c.suspect} (unconfirmed)` : c.noise ? `within noise (${c.noise})` : c.before ? "ok" : "new in the second run";
      const meanRatio = c.before && c.after ? c.before.mean_us / c.after.mean_us : undefined;
      return `  ${stageCell(r).padEnd(16)} ${r.op.padEnd(14)} ${String(r.count).padStart(12)} ${cell(c.before?.mean_us).padStart(10)} ${cell(c.after?.mean_us).padStart(10)} ${cell(meanRatio, 3).padStart(6)} ${fastest(r, c.before).padStart(10)} ${fastest(r, c.after).padStart(10)} ${cell(c.ratio, 3).padStart(6)}  ${verdict}`;
    }),
  ];
  lines.push(...notes);
  const regressions = rows.filter((c) => c.regression).length;
  const [suspects, differed] = [rows.filter((c) => c.suspect).length, rows.filter((c) => c.machine).length];
  lines.push(`# ${regressions} regression${regressions === 1 ? "" : "s"} (threshold ${(threshold * 100).toFixed(1)}%)${suspects ? `; ${suspects} slower? (unconfirmed)` : ""}${differed ? `; ${differed} on different machines` : ""}`);
  return lines.join("\n") + "\n";
}
