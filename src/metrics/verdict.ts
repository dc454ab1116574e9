// The one statistics module behind `runner compare` and `exp compare` (DESIGN.md, "Experiments"): a row's
// verdict from what each repetition measured. Each repetition gives one value, taken at its fastest iteration
// so that a stalled iteration cannot move it; the sides' values are compared by their medians (one slow
// repetition cannot move them either), and a change counts when an interval from an exact rank test across
// repetitions (Mann-Whitney U) lies wholly beyond a minimum relative threshold: when it holds across the
// repetitions, not in one of them. So that one slow repetition of the baseline cannot hide a large change
// either, a change beyond twice the threshold in both the best and the median repetition counts too, and beyond
// 1.5 times it where the interval lies wholly on that side of no change.
import type { ResultDocument } from "../results.js";

/** The rank test's level: a change is real when chance would order the repetitions so in under 5% of draws. */
export const ALPHA = 0.05;

/**
 * The smallest change that counts (13% less speed: 15% more time), where neither the command line nor the
 * experiment gives one: rows of identical campaigns run back to back on a busy 2-core machine drift by 10-15%
 * in every repetition (docs/PERFORMANCE.md, "Comparing campaigns").
 */
export const DEFAULT_THRESHOLD = 0.13;

/** Repetitions a side below which the rank test can never reach ALPHA (3 and 3: 1/20). */
export const MIN_REPS = 3;

export type Direction = "higher" | "lower";

export type Verdict = "regression" | "improvement" | "within tolerance" | "within noise" | "too few repetitions" | "machine differed";

export interface Judgement {
  /** Each side's median over its repetitions. */
  before: number;
  after: number;
  /** How much better (> 0) or worse (< 0), as a fraction, whichever way the metric is better. */
  gain: number;
  /** The gain's interval (each end at least a one-sided 95% bound), where the sides allow one. */
  interval?: [number, number];
  verdict: Verdict;
  /** judgeAlike judged the row on the repetitions of each machine both sides measured, not on all of them. */
  alike?: boolean;
}

export function median(v: readonly number[]): number {
  const s = [...v].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

/**
 * A repetition's value of `metric` at its fastest iteration, from a row's fields (`field("min_us")`):
 * time.avg_us becomes min_us, and busbw and algbw (bytes over the mean time) are rescaled to the fastest
 * time. On a shared machine noise only adds time, and a stalled iteration or a slow spell moves the mean
 * and even the median of a repetition, never its fastest iteration (docs/PERFORMANCE.md, "Comparing
 * campaigns": the median iteration let 5 of 20 pairs of identical campaigns under load regress). Other
 * metrics are taken as recorded.
 */
export function repetitionValue(metric: string, field: (name: string) => unknown): number | undefined {
  const num = (name: string) => (typeof field(name) === "number" && Number.isFinite(field(name)) ? (field(name) as number) : undefined);
  const [avg, fastest] = [num("avg_us"), num("min_us")];
  if (metric === "time.avg_us") return fastest ?? avg;
  const v = num(metric.startsWith("time.") ? metric.slice(5) : metric);
  if ((metric === "busbw" || metric === "algbw") && v !== undefined && avg !== undefined && fastest !== undefined && fastest > 0) return (v * avg) / fastest;
  return v;
}

/**
 * What repetitionValue reads for `metric`, named for showing beside its values: a table headed "time.avg_us"
 * above fastest iterations read 306 -> 5,603 us beside "2.074 better" for a row whose means went that way.
 */
export const repetitionMetric = (metric: string) =>
  metric === "time.avg_us" ? "time.min_us" : metric === "busbw" || metric === "algbw" ? `${metric}@fastest` : metric;

/** How many of the C(m + n, m) orderings of two samples give each U (0..m*n): the rank test's exact null distribution. */
function uCounts(m: number, n: number): number[] {
  // counts[i][j] for i of the first sample and j of the second, built up one value at a time.
  let row = Array.from({ length: n + 1 }, () => [1]);
  for (let i = 1; i <= m; i++) {
    const next: number[][] = [[1]];
    for (let j = 1; j <= n; j++) {
      // The largest value is from the first sample (adds j to U) or from the second (adds nothing).
      const withFirst = row[j]!, withSecond = next[j - 1]!;
      const out = new Array<number>(i * j + 1).fill(0);
      withFirst.forEach((c, u) => (out[u + j]! += c));
      withSecond.forEach((c, u) => (out[u]! += c));
      next.push(out);
    }
    row = next;
  }
  return row[n]!;
}

/**
 * How many of the m * n pairwise changes a one-sided bound at ALPHA leaves beyond it: the largest u with
 * P(U <= u) <= ALPHA, plus one; 0 where even u = 0 is likelier (too few repetitions for the test).
 */
function beyondBound(m: number, n: number): number {
  const counts = uCounts(m, n);
  const total = counts.reduce((a, b) => a + b, 0);
  let k = 0;
  for (let below = counts[0]!; k < counts.length && below / total <= ALPHA; below += counts[++k] ?? 0);
  return k;
}

/**
 * The verdict on one row's metric. The change between two repetitions is measured for every pair (one of each
 * side); the interval leaves out the k - 1 largest and smallest, k from the rank test (Mann-Whitney U,
 * one-sided 5% each way: 1 with 3 and 3 repetitions, 5 with 5 and 5), and one stray pair more, so that no
 * single pair decides (a repetition that met a slow spell on one side). Within tolerance when the medians
 * differ by no more than `threshold` (a fraction); a regression or an improvement when the whole interval
 * lies beyond it, or when the best repetitions and the medians both differ by more than twice the threshold, or
 * 1.5 times it with the interval wholly on that side of no change (largeChange); within noise otherwise; too few
 * repetitions when the sides are too small for the test.
 */
export function judge(before: readonly number[], after: readonly number[], direction: Direction, threshold: number): Judgement {
  const gain = gainOf(direction);
  const [mb, ma] = [median(before), median(after)];
  const base = { before: mb, after: ma, gain: gain(mb, ma) };
  if (!Number.isFinite(base.gain) || Math.abs(base.gain) <= threshold) return { ...base, verdict: "within tolerance" };
  const bound = beyondBound(before.length, after.length);
  if (bound === 0) return { ...base, verdict: "too few repetitions" };
  const k = bound + 1;
  const pairs = before.flatMap((b) => after.map((a) => gain(b, a))).sort((x, y) => x - y);
  const interval: [number, number] = [pairs[k - 1]!, pairs[pairs.length - k]!];
  const verdict = interval[1] < -threshold ? "regression" : interval[0] > threshold ? "improvement" : largeChange(before, after, direction, threshold, interval) ?? "within noise";
  return { ...base, interval, verdict };
}

/** The gain of `a` over `b` (a fraction, > 0 better) for a metric that is better `direction`. */
const gainOf = (direction: Direction) => (b: number, a: number) => (direction === "higher" ? a / b - 1 : b / a - 1);

/**
 * A change that the best repetitions (the fastest: noise only slows) and the medians both show beyond twice the
 * threshold, or beyond 1.5 times it where the rank test's interval also lies wholly on that side of no change;
 * else undefined. The interval beyond the threshold is the strict test: one baseline repetition that itself ran 2x
 * slow puts three of nine pairs at no change and hides a 2x slowdown from it, and a baseline campaign that drifted
 * 10% slow in every repetition leaves a 1.3x slowdown's interval short of it though every pair is slower
 * (docs/PERFORMANCE.md, "Comparing campaigns on a Zen 5 VM": a 1.3x slowdown of one op found in 176 -> 188 of 280
 * trials, identical pairs unchanged). Twice no threshold is no bar: a lead that must hold across repetitions
 * (threshold 0) needs the interval.
 */
function largeChange(before: readonly number[], after: readonly number[], direction: Direction, threshold: number, interval?: [number, number]): "regression" | "improvement" | undefined {
  if (!(threshold > 0)) return undefined;
  const [gain, best] = [gainOf(direction), (v: readonly number[]) => (direction === "higher" ? Math.max(...v) : Math.min(...v))];
  const gains = [gain(median(before), median(after)), gain(best(before), best(after))];
  // How far beyond the threshold the estimates must lie: 1.5x where the interval lies wholly on their side, else 2x.
  const [worse, better] = [interval && interval[1] < 0 ? 1.5 : 2, interval && interval[0] > 0 ? 1.5 : 2];
  return gains.every((g) => g < -worse * threshold) ? "regression" : gains.every((g) => g > better * threshold) ? "improvement" : undefined;
}

/**
 * A launch's core round trip (results.json `core_round_trip_ns`: rank 0's host's first rank to each other one, at
 * start-up): its farthest pair's, since every exchange waits for that pair; undefined where the file has none
 * (other backends, files before 2026-11-29, a stranger's field of another shape).
 */
export function coreRoundTrip(recorded: unknown): number | undefined {
  // A loop, not Math.max(...): a stranger's array of a million entries would overflow the call's arguments.
  let farthest: number | undefined;
  for (const v of Array.isArray(recorded) ? recorded : [recorded]) {
    if (typeof v === "number" && Number.isFinite(v) && v > 0 && (farthest === undefined || v > farthest)) farthest = v;
  }
  return farthest;
}

/**
 * Which machine each launch measured, by its core round trip: the round trips sorted, a new machine wherever one
 * lies more than APART above the one before (on the EPYC VM two machines, 49-67 ns and 297-347 ns, that a
 * hypervisor switches between every few minutes). Indices in the order given, none (undefined) for a launch without
 * a round trip, which cannot be placed (its start-up's probe gave up: a rank kept off its CPU for 50 ms under load);
 * undefined where no launch has one.
 */
export function machines(roundTrips: readonly (number | undefined)[]): (number | undefined)[] | undefined {
  const order = roundTrips.flatMap((t, i) => (t === undefined ? [] : [[t, i] as const])).sort((x, y) => x[0] - y[0]);
  if (!order.length) return undefined;
  const out = new Array<number | undefined>(roundTrips.length).fill(undefined);
  let machine = 0;
  order.forEach(([t, i], k) => {
    if (k > 0 && t > order[k - 1]![0] * APART) machine++;
    out[i] = machine;
  });
  return out;
}

/**
 * The machines (machines) of two sides' launches, by side, and those both sides measured (launches without a round
 * trip on none); undefined where the launches that have one measured one machine, or a side has none (other backends,
 * files before 2026-11-29): then nothing tells the sides' launches apart. One launch whose probe gave up under load
 * left four far launches judged against five near ones as one machine (docs/PERFORMANCE.md, "Few launches on a shared
 * machine").
 */
export function sideMachines(before: readonly (number | undefined)[], after: readonly (number | undefined)[]): { before: (number | undefined)[]; after: (number | undefined)[]; shared: number[] } | undefined {
  const machine = machines([...before, ...after]);
  const placed = (side: readonly (number | undefined)[]) => side.some((t) => t !== undefined);
  if (!machine || !placed(before) || !placed(after) || new Set(machine.filter((m) => m !== undefined)).size < 2) return undefined;
  const [mb, ma] = [machine.slice(0, before.length), machine.slice(before.length)];
  return { before: mb, after: ma, shared: [...new Set(mb)].filter((m): m is number => m !== undefined && ma.includes(m)) };
}

/** One repetition's value and its launch's core round trip (coreRoundTrip). */
export interface Measured {
  value: number;
  roundTrip?: number;
}

/**
 * The fewest orderings of two sides' launches (C(m + n, n)) for which every launch of one side beyond every one
 * of the other tells as much as the rank test's interval on one side of no change: chance alone orders them so in
 * 1 of 6 draws or fewer (5 launches against 1, 3 against 2). Measured on the Zen 5 VM's 5-repetition campaigns
 * with one side's launches cut to the few on a shared machine (docs/PERFORMANCE.md, "Few launches on a shared
 * machine"): a whole op 1.3x slower found at 5 against 1 in 216 -> 481 of 560 idle trials, identical pairs clean in
 * 275 -> 265 of 280, as 5 against 2 already were (263 of 280); at 3 against 1 (4 orderings) identical pairs went
 * 123 -> 114 of 126 (three sets), so there the bar stays twice the threshold.
 */
const FEW_ORDERINGS = 6;

/** C(m + n, n): the orderings of m and n launches by value. */
function orderings(m: number, n: number): number {
  let c = 1;
  for (let i = 1; i <= n; i++) c = (c * (m + i)) / i;
  return c;
}

/**
 * judge() for the repetitions of one machine, where a side may have too few for the rank test: then, with
 * MIN_REPS pairs or more, a change beyond the threshold in every pair and beyond twice it in the best and the
 * median repetitions (largeChange) counts: 3 against 1 repetition, all 2x slower; 3 against 2 where one of the 3
 * itself ran 1.5x slow. Where the sides have FEW_ORDERINGS orderings or more, every pair on one side stands for
 * the rank test's interval there, and 1.5 times the threshold suffices, as it does with the test: a 1.3x slowdown
 * (23% less speed) against 5 launches with 1 on the machine they share. Anything less is within noise.
 */
function judgeFew(before: readonly number[], after: readonly number[], direction: Direction, threshold: number): Verdict {
  const j = judge(before, after, direction, threshold);
  if (j.verdict !== "too few repetitions" || before.length * after.length < MIN_REPS) return j.verdict;
  const gain = gainOf(direction);
  const pairs = before.flatMap((b) => after.map((a) => gain(b, a)));
  const span: [number, number] = [Math.min(...pairs), Math.max(...pairs)];
  const large = largeChange(before, after, direction, threshold, orderings(before.length, after.length) >= FEW_ORDERINGS ? span : undefined);
  const beyond = (g: number) => (large === "regression" ? g < -threshold : g > threshold);
  return large && pairs.every(beyond) ? large : "within noise";
}

/**
 * judge() of like with like: where the launches measured more than one machine (machines), each machine both sides
 * measured is judged on its own repetitions (judgeFew), and the row takes their verdict where they agree, within
 * noise where they do not, and "machine differed" where the sides share no machine. A 2-vCPU VM whose vCPUs the
 * hypervisor moved ran every op 4-7x slower for minutes (Open MPI's too), so identical campaigns under load regressed
 * in 4-5 of 20 pairs (2 like with like); no statistic over the values alone tells that from a slowdown of the code
 * (docs/PERFORMANCE.md, "The machine's two states"). Medians and gain are those of the repetitions judged (all of
 * them where no machine could be): a verdict shown beside the change of other repetitions read "REGRESSION ...
 * (18.0% better)".
 */
export function judgeAlike(before: readonly Measured[], after: readonly Measured[], direction: Direction, threshold: number): Judgement {
  const value = (m: Measured) => m.value;
  const all = judge(before.map(value), after.map(value), direction, threshold);
  const roundTrip = (m: Measured) => m.roundTrip;
  // Even where the medians over all launches agree: two of three baseline launches on a machine 2.3x slower put a
  // 2x slowdown within tolerance of them (docs/PERFORMANCE.md, "Comparing campaigns on a Zen 5 VM").
  const sides = sideMachines(before.map(roundTrip), after.map(roundTrip));
  if (!sides) return all;
  if (!sides.shared.length) return { before: all.before, after: all.after, gain: all.gain, verdict: "machine differed" };
  const on = (side: readonly Measured[], of: (number | undefined)[], m: readonly number[]) => side.filter((_, i) => of[i] !== undefined && m.includes(of[i]!)).map(value);
  const judged = sides.shared.map((m) => [m, judgeFew(on(before, sides.before, [m]), on(after, sides.after, [m]), direction, threshold)] as const)
    .filter(([, v]) => v !== "too few repetitions");
  if (!judged.length) return { before: all.before, after: all.after, gain: all.gain, verdict: "too few repetitions", alike: true };
  const verdict = judged.every(([, v]) => v === judged[0]![1]) ? judged[0]![1] : "within noise";
  const machinesJudged = judged.map(([m]) => m);
  const shown = judge(on(before, sides.before, machinesJudged), on(after, sides.after, machinesJudged), direction, threshold);
  return { before: shown.before, after: shown.after, gain: shown.gain, verdict, alike: true };
}

/**
 * Where the launches of two sides measured more than one machine (machines), what each side measured: "the
 * baseline: 3 launches at 49-52 ns; the new campaign: 2 at 310-327 ns, 1 at 50 ns"; "" where all measured one.
 */
export function describeMachines(sides: readonly [string, readonly (number | undefined)[]][]): string {
  const all = sides.flatMap(([, trips]) => trips);
  const machine = machines(all);
  if (!machine || new Set(machine).size < 2) return "";
  let at = 0;
  return sides.map(([name, trips]) => {
    const mine = trips.map((t, i) => [machine[at + i]!, t!] as const);
    at += trips.length;
    const counts = [...new Set(mine.map(([m]) => m))].sort((x, y) => x - y).map((m) => {
      const ns = mine.filter(([k]) => k === m).map(([, t]) => t);
      const [lo, hi] = [Math.min(...ns).toFixed(0), Math.max(...ns).toFixed(0)];
      return `${ns.length} at ${lo === hi ? lo : `${lo}-${hi}`} ns`;
    });
    return `${name}: ${counts.join(", ")}`;
  }).join("; ");
}

/** The line a comparison gives sides whose launches measured more than one machine (`what`: describeMachines). */
export const machinesNote = (what: string) =>
  `# MACHINES: the launches' cores were apart by different round trips (a cache line between the ranks' CPUs, timed at start-up): ${what}; each row is judged on the launches of a machine both sides measured, "machine differed" where they share none`;

/** A judgement's interval in words: "change across repetitions -31.2%..-18.0%". */
export const describeInterval = ([lo, hi]: [number, number]) => `change across repetitions ${(lo * 100).toFixed(1)}%..${(hi * 100).toFixed(1)}%`;

/**
 * Where a run's ranks outnumbered their host's cores ("3 ranks on 2 cores (vm)"), from its results file's
 * topology and manifest; undefined where every host had a core per rank, or the file does not say (files
 * before 2026-11-28 record no cores). Such ranks take turns on the cores, so their times move by whole
 * scheduler time slices as the machine's load changes: on the 2-core VM under load, repetitions of one row
 * 2-100x apart (docs/PERFORMANCE.md, "Comparing campaigns"), which no verdict can see through.
 */
export function oversubscribed(doc: Pick<ResultDocument, "topology" | "manifest">): string | undefined {
  // Results files come from anywhere (a colleague's, a stranger's): a field of the wrong shape says nothing.
  const list = <T>(v: T[] | undefined): T[] => (Array.isArray(v) ? v : []);
  const cores = new Map(list(doc.manifest?.hosts).filter((h) => Number.isInteger(h?.cores)).map((h) => [h.name, h.cores!]));
  const over = list(doc.topology?.hosts).filter((h) => Array.isArray(h?.ranks) && h.ranks.length > (cores.get(h.name) ?? Infinity));
  return over.length ? over.map((h) => `${h.ranks.length} ranks on ${cores.get(h.name)} cores (${h.name})`).join(", ") : undefined;
}

/** The line a comparison gives such runs. */
export const oversubscribedNote = (where: string, what: string) =>
  `# OVERSUBSCRIBED ${where}: ${what}: the ranks took turns on the cores, so a busy machine moves their times by whole time slices and a verdict there cannot be trusted; measure with ranks <= cores`;

/** How far from a row's median over the repetitions one repetition's value may lie, either way, before it ran apart in that row. */
export const APART = 1.5;

/** A repetition that ran apart from the others in most of the rows they share. */
export interface ApartRepetition {
  /** Its index among the repetitions. */
  index: number;
  /** The rows it ran apart in, of its rows that MIN_REPS or more repetitions have. */
  rows: number;
  of: number;
  /** Its value over the row's median, lowest and highest over the rows it ran apart in. */
  low: number;
  high: number;
}

/**
 * The repetitions that measured another machine, from each row's values by repetition (undefined where one lacks
 * the row): apart in a row beyond APART of the row's median either way, and in at least half of its rows and two
 * or more. A change in the code moves a row in every repetition and a stalled iteration moves none's fastest, but a
 * spell moves every row of the repetitions it meets: on the EPYC VM, allreduce 3.5-7.5x slow at every iteration of
 * a launch while the launches before and after it ran as usual (docs/PERFORMANCE.md, "On a dedicated AMD EPYC VM").
 * Two such repetitions of five hide a 1.3x slowdown from any verdict that keeps identical campaigns clean, so the
 * comparison names them rather than leaving them out.
 */
export function apartRepetitions(table: readonly (readonly (number | undefined)[])[]): ApartRepetition[] {
  const positive = (v: number | undefined): v is number => v !== undefined && Number.isFinite(v) && v > 0;
  const reps = table.reduce((n, row) => Math.max(n, row.length), 0);
  const out: ApartRepetition[] = [];
  for (let i = 0; i < reps; i++) {
    const ratios = table.flatMap((row) => {
      const present = [...row].filter(positive);
      const v = row[i];
      return positive(v) && present.length >= MIN_REPS ? [v / median(present)] : [];
    });
    const apart = ratios.filter((r) => r > APART || r < 1 / APART);
    if (apart.length >= 2 && 2 * apart.length >= ratios.length) out.push({ index: i, rows: apart.length, of: ratios.length, low: Math.min(...apart), high: Math.max(...apart) });
  }
  return out;
}

/** "run 2 ran 3.50-7.52x the median in 6 of 8 rows", and what its start-up found apart (startupApart), if anything. */
const describeApart = (a: ApartRepetition, name: string, startup: string) =>
  `${name} ran ${a.low.toFixed(2)}${a.high.toFixed(2) === a.low.toFixed(2) ? "" : `-${a.high.toFixed(2)}`}x the median in ${a.rows} of ${a.of} rows${startup && ` (${startup})`}`;

const MAX_COPY_PATH = 300;

/** Whether a results file's copy_path is one: a copy path is about 110 characters; anything far longer is a stranger's. */
const isPath = (p: unknown): p is string => typeof p === "string" && p.length <= MAX_COPY_PATH;

/** A copy path in short: "single copy from 16 KiB, broadcast from 32 KiB", or "staged (why)" as it stands. */
const shortPath = (copyPath: string) => {
  const from = /^single-copy.*? (from [^(]*?)(?= \(|$)/.exec(copyPath)?.[1];
  return from ? `single copy ${from}` : copyPath;
};

/**
 * How repetition `index`'s start-up differed from every other's but those `apart` with it, by each repetition's
 * copy path (results.json `copy_path`; anything but a string where a file has none), or "". Where the ranks time
 * the staged path against single copy at start-up, a launch in which every exchange between the ranks is dear
 * finds single copy (one handshake) ahead from a smaller size, and its ops run slow at every iteration: on the
 * EPYC VM, 152 of 158 W=2 launches that chose single copy from 16-32 KiB ran the 1 MiB allreduce over 2x slow,
 * 1 of 277 others did (docs/PERFORMANCE.md, "What the spells are").
 */
export function startupApart(copyPaths: readonly unknown[], index: number, apart: readonly number[] = []): string {
  const mine = copyPaths[index];
  const others = copyPaths.filter((p, i): p is string => i !== index && !apart.includes(i) && isPath(p));
  const counts = new Map<string, number>();
  for (const p of others) counts.set(p, (counts.get(p) ?? 0) + 1);
  const usual = [...counts].sort((x, y) => y[1] - x[1])[0]?.[0];
  if (!isPath(mine) || usual === undefined || counts.has(mine)) return "";
  return `its start-up chose ${shortPath(mine)}, the others' mostly ${shortPath(usual)}`;
}

/**
 * Where repetition `index`'s start-up timed its ranks' cores on another machine than every other repetition's but
 * those `apart` with it (machines, by coreRoundTrip), how far: "its start-up timed the ranks' cores 51 ns apart, the
 * others' 310-336 ns"; else "". That is what a spell was on the EPYC VM (docs/PERFORMANCE.md, "The machine's two
 * states"), and says it more plainly than the copy path it moved.
 */
export function coresApart(roundTrips: readonly (number | undefined)[], index: number, apart: readonly number[] = []): string {
  const mine = roundTrips[index];
  const others = roundTrips.filter((t, i): t is number => i !== index && !apart.includes(i) && t !== undefined);
  const machine = machines([mine, ...others]);
  if (mine === undefined || !machine || !others.length || machine.slice(1).includes(machine[0]!)) return "";
  const [lo, hi] = [Math.min(...others).toFixed(0), Math.max(...others).toFixed(0)];
  return `its start-up timed the ranks' cores ${mine!.toFixed(0)} ns apart, the others' ${lo === hi ? lo : `${lo}-${hi}`} ns`;
}

/**
 * What an UNSTEADY note says of `apart`: each repetition (`name` names it by index) and its start-up (coresApart, else
 * startupApart), joined.
 */
export function describeAparts(apart: readonly ApartRepetition[], name: (index: number) => string, copyPaths: readonly unknown[], roundTrips: readonly (number | undefined)[] = []): string {
  const indices = apart.map((a) => a.index);
  return apart.map((a) => describeApart(a, name(a.index), coresApart(roundTrips, a.index, indices) || startupApart(copyPaths, a.index, indices))).join("; ");
}

/**
 * How the launches of a point whose start-ups chose more than one copy path (results.json `copy_path`) chose:
 * "7 single copy from 1 MiB, broadcast from 4 MiB; 3 single copy from 128 KiB, ..." (most first), or "" where they
 * all chose one. Where staging and single copy nearly tie, each start-up picks either, and the rows move with it: on
 * the Zen 5 VM a W = 2 all_gather of 512 KiB ran 18-20 us staged and 25-28 single-copy, by launch (docs/PERFORMANCE.md,
 * "Pinned copy paths").
 */
export function mixedPaths(copyPaths: readonly unknown[]): string {
  const counts = new Map<string, number>();
  for (const p of copyPaths.filter(isPath).map(shortPath)) counts.set(p, (counts.get(p) ?? 0) + 1);
  return counts.size < 2 ? "" : [...counts].sort((x, y) => y[1] - x[1]).map(([p, n]) => `${n} ${p}`).join("; ");
}

/** The line a comparison gives the points of mixedPaths (`what`: how their launches chose). */
export const mixedPathsNote = (where: string, what: string) =>
  `# COPY PATHS ${where}: the launches' start-ups chose ${what}: a near tie that moves the rows it decides between launches; SPMD_SHM_SINGLE_COPY=fixed (an experiment's env) keeps the paths untimed, the same in every launch`;

/** The line a comparison gives a side whose repetitions ran apart (`what`: their describeAparts). */
export const unsteadyNote = (where: string, what: string) =>
  `# UNSTEADY ${where}: ${what}: the machine changed while they ran (a slow spell, other work on its cores, its vCPUs moved), so a verdict on these rows can be wrong; run more repetitions, spread in time`;
