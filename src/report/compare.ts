import { readFileSync } from "node:fs";
import * as z from "zod";
import { ConfigError, configErrorFromZod } from "../config/errors.js";

// Only what comparing needs; other fields (and later additions) pass through untouched.
const rowSchema = z.looseObject({
  stage: z.string(),
  op: z.string(),
  count: z.number(),
  size: z.number(),
  type: z.string().nullable(),
  redop: z.string().nullable(),
  root: z.number().nullable(),
  time: z.looseObject({ avg_us: z.number() }),
  busbw: z.number(),
  wrong: z.number().nullable(),
});
const documentSchema = z.looseObject({ job: z.string(), world_size: z.number(), results: z.array(rowSchema), manifest: z.unknown().optional() });
type Row = z.output<typeof rowSchema>;

export function loadResults(file: string): z.output<typeof documentSchema> {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new ConfigError(file, "", `cannot read file: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    throw new ConfigError(file, "", "not a JSON result file");
  }
  const parsed = documentSchema.safeParse(data);
  if (!parsed.success) throw configErrorFromZod(file, parsed.error);
  return parsed.data;
}

export interface Comparison {
  key: string;
  /** The row as the first run of each side has it. */
  before?: Row;
  after?: Row;
  /** after / before of the medians over runs of busbw (or of 1/time for rows that move no bytes): > 1 is faster. */
  ratio?: number;
  /** With several runs on a side: the ratio's 95% bootstrap interval. */
  interval?: [number, number];
  regression: string | undefined;
  /** Slower beyond the threshold, but inside the runs' own spread. */
  noise?: boolean;
}

const keyOf = (r: Row) => `${r.stage} ${r.op} ${r.count} ${r.type ?? "-"} ${r.redop ?? "-"} ${r.root ?? "-"}`;

/** Higher is faster: busbw, or the rate of rows that move no bytes. */
const speed = (r: Row) => (r.size > 0 ? r.busbw : 1 / r.time.avg_us);

const BOOTSTRAP_RESAMPLES = 2000;

/** A small seeded generator (mulberry32): the same files always get the same verdict. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The 95% percentile-bootstrap interval of median(after) / median(before): each side's runs are resampled
 * with replacement, BOOTSTRAP_RESAMPLES times.
 */
export function bootstrapRatio(before: number[], after: number[], seed = 1): [number, number] {
  const next = random(seed);
  const resample = (v: number[]) => median(v.map(() => v[Math.floor(next() * v.length)]!));
  const ratios = Array.from({ length: BOOTSTRAP_RESAMPLES }, () => resample(after) / resample(before)).sort((x, y) => x - y);
  return [ratios[Math.floor(0.025 * ratios.length)]!, ratios[Math.ceil(0.975 * ratios.length) - 1]!];
}

function median(v: number[]): number {
  const s = [...v].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

/** One row over every run of both sides (each list holds the row from each run that has it). */
function compareRow(key: string, b: Row[], a: Row[], threshold: number): Comparison {
  if (!a.length) return { key, before: b[0], regression: "missing in the second run" };
  const ratio = median(a.map(speed)) / median(b.map(speed));
  const wrong = a.reduce((n, r) => n + (r.wrong ?? 0), 0);
  const base = { key, before: b[0], after: a[0], ratio };
  if (wrong > 0) return { ...base, regression: `${wrong} wrong elements` };
  if (!(Number.isFinite(ratio) && ratio < 1 - threshold)) return { ...base, regression: undefined };
  const slower = `${((1 - ratio) * 100).toFixed(1)}% slower`;
  if (a.length < 2 && b.length < 2) return { ...base, regression: slower }; // no spread to weigh it against
  const interval = bootstrapRatio(b.map(speed), a.map(speed));
  // Slower only when even the interval's fast end is slower: the difference exceeds the runs' spread.
  return interval[1] < 1 ? { ...base, interval, regression: slower } : { ...base, interval, regression: undefined, noise: true };
}

/**
 * Rows matched by stage and shape over the runs of each side; a slowdown beyond `threshold` (a fraction)
 * that also exceeds the runs' own spread, wrong elements or a missing row regress.
 */
export function compareRuns(before: Row[][], after: Row[][], threshold: number): Comparison[] {
  const group = (runs: Row[][]) => {
    const m = new Map<string, Row[]>();
    for (const r of runs.flat()) m.set(keyOf(r), [...(m.get(keyOf(r)) ?? []), r]);
    return m;
  };
  const earlier = group(before), later = group(after);
  const out = [...earlier].map(([key, b]) => compareRow(key, b, later.get(key) ?? [], threshold));
  for (const [key, a] of later) if (!earlier.has(key)) out.push({ key, after: a[0], regression: undefined });
  return out;
}

/** Two runs, one per side. */
export function compareResults(before: Row[], after: Row[], threshold: number): Comparison[] {
  return compareRuns([before], [after], threshold);
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

export function formatComparison(rows: Comparison[], threshold: number, differences: string[] = []): string {
  const cell = (v: number | undefined, d = 2) => (v === undefined || !Number.isFinite(v) ? "-" : v.toFixed(d));
  const lines = [
    ...(differences.length ? ["# the runs differ in their manifests:", ...differences.map((d) => `#   ${d}`)] : []),
    `# ${"stage".padEnd(16)} ${"op".padEnd(14)} ${"count".padStart(12)} ${"busbw A".padStart(9)} ${"busbw B".padStart(9)} ${"time A".padStart(10)} ${"time B".padStart(10)} ${"B/A".padStart(6)}  verdict`,
    ...rows.map((c) => {
      const r = (c.before ?? c.after)!;
      const range = c.interval ? ` (95% interval ${c.interval[0].toFixed(3)}..${c.interval[1].toFixed(3)})` : "";
      const verdict = c.regression
        ? `REGRESSION: ${c.regression}${range}`
        : c.noise ? `within noise${range}` : c.before ? "ok" : "new in the second run";
      return `  ${r.stage.padEnd(16)} ${r.op.padEnd(14)} ${String(r.count).padStart(12)} ${cell(c.before?.busbw).padStart(9)} ${cell(c.after?.busbw).padStart(9)} ${cell(c.before?.time.avg_us).padStart(10)} ${cell(c.after?.time.avg_us).padStart(10)} ${cell(c.ratio, 3).padStart(6)}  ${verdict}`;
    }),
  ];
  const regressions = rows.filter((c) => c.regression).length;
  lines.push(`# ${regressions} regression${regressions === 1 ? "" : "s"} (threshold ${(threshold * 100).toFixed(1)}%)`);
  return lines.join("\n") + "\n";
}
