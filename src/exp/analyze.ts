// The campaign's rows grouped over repetitions (median and spread per point and row), the best choice per
// op × size × world size, and direction-aware, noise-aware changes between two campaigns.
import { apartRepetitions, describeAparts, describeInterval, describeMachines, judgeAlike, machinesNote, median, MIN_REPS, mixedPaths, mixedPathsNote, oversubscribedNote, repetitionMetric, repetitionValue, unsteadyNote, type Direction, type Judgement, type Measured, type Verdict } from "../metrics/verdict.js";
import { formatSize } from "../config/size.js";
import type { Database } from "./store.js";

/** A result row joined with its point's coordinates, as the index holds it. */
export type CampaignRow = Record<string, unknown> & {
  point_id: string; rep: number; job: string; backend: string; world_size: number; hosts: number; variant: string;
  executor: string | null; stage: string; op: string; size: number; type: string | null; busbw: number; wrong: number | null;
};

export function campaignRows(db: Database): CampaignRow[] {
  return db.prepare("SELECT p.job, p.backend, p.world_size, p.hosts, p.variant, p.executor, r.* FROM rows r JOIN points p USING (point_id) ORDER BY p.job, r.stage, r.size, p.world_size, p.backend, p.variant, r.rep").all() as CampaignRow[];
}

/** The index's column of a metric: "time.p50_us" -> p50_us, "overlap.overlap_pct" -> overlap_overlap_pct. */
export { median };

export const metricColumn = (metric: string) => (metric.startsWith("time.") ? metric.slice(5) : metric.replace(/[^A-Za-z0-9_]/g, "_"));

/** One row of one point over its repetitions. */
export interface Group {
  /** What names it across campaigns: the point's coordinates and the row's stage and shape. */
  key: string;
  first: CampaignRow;
  /** Each repetition's row. */
  rows: CampaignRow[];
}

const AXES = ["job", "backend", "world_size", "hosts", "variant", "executor"] as const;
const rowKey = (r: CampaignRow) => JSON.stringify([...AXES.map((a) => r[a]), r.stage, r.op, r.size, r.type, r.params_json ?? null, ...Object.keys(r).filter((k) => k.startsWith("params_")).sort().map((k) => r[k])]);

export function groupRows(rows: CampaignRow[]): Group[] {
  const groups = new Map<string, Group>();
  for (const r of rows) {
    const key = rowKey(r);
    const g = groups.get(key);
    if (g) g.rows.push(r);
    else groups.set(key, { key, first: r, rows: [r] });
  }
  return [...groups.values()];
}

export const values = (g: Group, column: string) => g.rows.map((r) => r[column]).filter((v): v is number => typeof v === "number");

/** The matrix axes that take more than one value: what a series is named by (backend, variant, hosts). */
export function seriesAxes(rows: CampaignRow[]): ("backend" | "variant" | "hosts")[] {
  const axes = (["backend", "variant", "hosts"] as const).filter((a) => new Set(rows.map((r) => r[a])).size > 1);
  return axes.length ? axes : ["backend"];
}

export const seriesOf = (r: CampaignRow, axes: readonly string[]) => axes.map((a) => (a === "hosts" ? `${r.hosts} hosts` : String(r[a]))).join(" / ");

export interface Crossover {
  job: string; stage: string; op: string; size: number; world_size: number;
  best: string; value: number; runnerUp?: string; margin?: number;
  /** Why the lead may not be real: "within noise", "too few repetitions", "machine differed" (the verdict of best against runner-up, like with like). */
  doubt?: string;
}

/** Per job, stage, size and world size: the series with the highest median busbw, by how much it leads, and whether that holds across repetitions. */
export function crossovers(groups: Group[], axes: readonly string[]): Crossover[] {
  const cells = new Map<string, { series: string; value: number; g: Group }[]>();
  for (const g of groups) {
    if (!(g.first.size > 0)) continue;
    const k = JSON.stringify([g.first.job, g.first.stage, g.first.size, g.first.world_size]);
    cells.set(k, [...(cells.get(k) ?? []), { series: seriesOf(g.first, axes), value: median(values(g, "busbw")), g }]);
  }
  return [...cells.values()].filter((c) => c.length > 1).map((c) => {
    const [best, next] = [...c].sort((a, b) => b.value - a.value);
    const r = best!.g.first;
    const lead = next ? judgeAlike(measured(next.g, "busbw"), measured(best!.g, "busbw"), "higher", 0).verdict : undefined;
    return {
      job: r.job, stage: r.stage, op: r.op, size: r.size, world_size: r.world_size, best: best!.series, value: best!.value,
      runnerUp: next?.series, margin: next && next.value > 0 ? best!.value / next.value - 1 : undefined, doubt: lead === "improvement" ? undefined : lead,
    };
  });
}

export interface Change extends Omit<Judgement, "verdict"> {
  key: string;
  row: CampaignRow;
  metric: string;
  verdict: Verdict | "wrong elements";
}

/**
 * Each repetition's value of a metric in a group, at its fastest iteration (metrics/verdict.ts, repetitionValue), with
 * its launch's core round trip (the index's column, where it has one).
 */
const measured = (g: Group, metric: string): Measured[] => g.rows.flatMap((r) => {
  const value = repetitionValue(metric, (name) => r[metricColumn(name)]);
  const roundTrip = typeof r.core_round_trip_ns === "number" ? r.core_round_trip_ns : undefined;
  return value === undefined ? [] : [{ value, roundTrip }];
});


/** For each metric and each row both campaigns have: whether it got better or worse beyond tolerance and noise, like machine with like (judgeAlike). */
export function compareCampaigns(before: Group[], after: Group[], metrics: Record<string, Direction>, tolerance: Record<string, number>, defaultTolerance: number): Change[] {
  const earlier = new Map(before.map((g) => [g.key, g]));
  const out: Change[] = [];
  for (const a of after) {
    const b = earlier.get(a.key);
    if (!b) continue;
    const wrong = a.rows.reduce((n, r) => n + (r.wrong ?? 0), 0);
    for (const [metric, direction] of Object.entries(metrics)) {
      const [bv, av] = [measured(b, metric), measured(a, metric)];
      if (!bv.length || !av.length) continue;
      const j = judgeAlike(bv, av, direction, tolerance[metric] ?? defaultTolerance);
      out.push({ ...j, key: a.key, row: a.first, metric, verdict: wrong > 0 ? "wrong elements" : j.verdict });
    }
  }
  return out;
}

/**
 * The points of a campaign whose repetitions ran apart (metrics/verdict.ts, apartRepetitions), by each repetition's
 * fastest iteration of every row: [side and parameters, which repetitions and how far]; `names` gives a point's
 * parameters.
 */
export function unsteadyPoints(side: string, groups: Group[], names: Map<string, string>): [string, string][] {
  const byPoint = new Map<string, Group[]>();
  for (const g of groups) byPoint.set(g.first.point_id, [...(byPoint.get(g.first.point_id) ?? []), g]);
  return [...byPoint].flatMap(([id, point]) => {
    // A column per repetition the point has, in order: its numbers come from folder names, so they index nothing.
    const reps = [...new Set(point.flatMap((g) => g.rows.map((r) => r.rep)))].sort((a, b) => a - b);
    const column = new Map(reps.map((rep, i) => [rep, i]));
    const table = point.map((g) => {
      const row = new Array<number | undefined>(reps.length).fill(undefined);
      for (const r of g.rows) row[column.get(r.rep)!] = repetitionValue("time.avg_us", (name) => r[metricColumn(name)]);
      return row;
    });
    const apart = apartRepetitions(table);
    // Each repetition's start-up copy path and core round trip (columns of every row it wrote; older files have none).
    const rows = point.flatMap((g) => g.rows);
    const firsts = reps.map((rep) => rows.find((r) => r.rep === rep));
    const copyPaths = firsts.map((r) => r?.copy_path);
    const roundTrips = firsts.map((r) => r?.core_round_trip_ns).map((t) => (typeof t === "number" ? t : undefined));
    return apart.length ? [[`${side} ${names.get(id) ?? id}`, describeAparts(apart, (i) => `repetition ${reps[i]}`, copyPaths, roundTrips)] as [string, string]] : [];
  });
}

/**
 * The points whose launches, on both sides together, took more than one copy path (metrics/verdict.ts, mixedPaths):
 * [parameters, how they chose]; `names` gives a point's parameters.
 */
export function mixedPathPoints(before: Group[], after: Group[], names: Map<string, string>): [string, string][] {
  // A launch is a side's repetition of a point: its rows all carry its start-up's copy path.
  const launches = new Map<string, Map<string, unknown>>();
  [before, after].forEach((groups, side) => {
    for (const r of groups.flatMap((g) => g.rows)) {
      if (!launches.has(r.point_id)) launches.set(r.point_id, new Map());
      launches.get(r.point_id)!.set(`${side}/${r.rep}`, r.copy_path);
    }
  });
  return [...launches].flatMap(([id, paths]) => {
    const how = mixedPaths([...paths.values()]);
    return how ? [[names.get(id) ?? id, how] as [string, string]] : [];
  });
}

export const isRegression = (c: Change) => c.verdict === "regression" || c.verdict === "wrong elements";

export const describeRow = (r: CampaignRow) => `${r.job} ${r.stage} (${r.op}) size ${formatSize(r.size)} W=${r.world_size} ${r.backend}/${r.variant}${r.hosts > 1 ? ` ${r.hosts} hosts` : ""}`;

/**
 * What each campaign's launches measured where they measured more than one machine (describeMachines), by each
 * repetition's core round trip, of the launches that timed one (shm's; not where rank 0 had one CPU); "" where all
 * measured one.
 */
export function campaignMachines(before: Group[], after: Group[]): string {
  const trips = (groups: Group[]) => {
    const launches = new Map(groups.flatMap((g) => g.rows.map((r) => [`${r.point_id}/${r.rep}`, r.core_round_trip_ns] as const)));
    return [...launches.values()].filter((t): t is number => typeof t === "number");
  };
  return describeMachines([["the baseline", trips(before)], ["the new campaign", trips(after)]]);
}

/** Two campaigns side by side: every row's verdicts, the points only one of them measured, the other's failures. */
export interface CampaignComparison {
  changes: Change[];
  /** "only in the baseline: job=... " per point with results on one side only. */
  missing: string[];
  /** Points of the later campaign that failed. */
  failed: number;
  /** The fewest repetitions a point has on either side. */
  reps: [number, number];
  /** Points whose ranks outnumbered a host's cores, on either side: [parameters, "3 ranks on 2 cores (vm)"]. */
  oversubscribed: [string, string][];
  /** Points of either side whose repetitions ran apart (unsteadyPoints): [side and parameters, how]. */
  unsteady: [string, string][];
  /** What each side's launches measured where more than one machine (campaignMachines), else "". */
  machines: string;
  /** Points whose launches took more than one copy path (mixedPathPoints): [parameters, how]. */
  mixedPaths: [string, string][];
}

export const comparisonFails = (c: CampaignComparison) => c.missing.length > 0 || c.changes.some(isRegression);

const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? "" : "s"}`;

/** The verdict in one line: PASS or FAIL with the counts that decide it, then the rest. */
export function headline(c: CampaignComparison): string {
  const count = (v: Change["verdict"]) => c.changes.filter((x) => x.verdict === v).length;
  const wrong = count("wrong elements");
  const decisive = [plural(count("regression"), "regression"), plural(count("improvement"), "improvement"), `${c.missing.length} missing`, `${c.failed} failed`, ...(wrong ? [`${wrong} with wrong elements`] : [])];
  const also = (v: Change["verdict"]) => (count(v) ? `, ${count(v)} ${v}` : "");
  const rest = `${count("within tolerance")} within tolerance, ${count("within noise")} within noise${also("too few repetitions")}${also("machine differed")}`;
  return `# ${comparisonFails(c) ? "FAIL" : "PASS"}: ${decisive.join(", ")} (${rest}; ${plural(c.changes.length, "comparison")}, ${c.reps[0]} and ${c.reps[1]} repetitions)`;
}

const ORDER = ["wrong elements", "regression", "improvement", "machine differed", "within noise", "too few repetitions"];

/** The changes beyond tolerance, regressions first (rows within tolerance are only counted). */
export const shownChanges = (changes: Change[]) => changes.filter((x) => x.verdict !== "within tolerance").sort((x, y) => ORDER.indexOf(x.verdict) - ORDER.indexOf(y.verdict));

/** The comparison as text: one line per change beyond tolerance, the missing points, the headline. */
export function formatChanges(c: CampaignComparison): string {
  const lines = shownChanges(c.changes).map((x) => {
    const p = x.interval ? ` (${describeInterval(x.interval)})` : x.alike ? " (judged on the repetitions of a machine both campaigns measured)" : "";
    return `${x.verdict.toUpperCase().padEnd(19)} ${repetitionMetric(x.metric).padEnd(14)} ${describeRow(x.row)}: ${x.before.toPrecision(4)} -> ${x.after.toPrecision(4)} (${(Math.abs(x.gain) * 100).toFixed(1)}% ${x.gain >= 0 ? "better" : "worse"})${p}`;
  });
  const few = Math.min(...c.reps) < MIN_REPS
    ? [`# too few repetitions: ${c.reps[0]} and ${c.reps[1]}; the test across repetitions needs ${MIN_REPS} a side, so no row is a regression for being slower`]
    : [];
  const values = lines.length ? ["# values: what each verdict is taken on, each side's median over its repetitions of a repetition's fastest iteration (time.min_us; busbw@fastest, algbw@fastest: at that time); the change is the ratio of the two values shown"] : [];
  const crowded = c.oversubscribed.map(([where, what]) => oversubscribedNote(where, what));
  return [...lines, ...values, ...c.missing.map((m) => `MISSING             ${m}`), ...few, ...crowded, ...c.unsteady.map(([where, what]) => unsteadyNote(where, what)), ...c.mixedPaths.map(([where, what]) => mixedPathsNote(where, what)), ...(c.machines ? [machinesNote(c.machines)] : []), headline(c)].join("\n") + "\n";
}
