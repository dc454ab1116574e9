// The campaign's rows grouped over repetitions (median and spread per point and row), the best choice per
// op × size × world size, and direction-aware, noise-aware changes between two campaigns.
import { bootstrapRatio } from "../report/compare.js";
import type { Database } from "./store.js";

/** A result row joined with its point's coordinates, as the index holds it. */
export type CampaignRow = Record<string, unknown> & {
  point_id: string; rep: number; job: string; backend: string; world_size: number; hosts: number; variant: string;
  stage: string; op: string; size: number; type: string | null; busbw: number; wrong: number | null;
};

export function campaignRows(db: Database): CampaignRow[] {
  return db.prepare("SELECT p.job, p.backend, p.world_size, p.hosts, p.variant, r.* FROM rows r JOIN points p USING (point_id) ORDER BY p.job, r.stage, r.size, p.world_size, p.backend, p.variant, r.rep").all() as CampaignRow[];
}

/** The index's column of a metric: "time.p50_us" -> p50_us, "overlap.overlap_pct" -> overlap_overlap_pct. */
export const metricColumn = (metric: string) => (metric.startsWith("time.") ? metric.slice(5) : metric.replace(/[^A-Za-z0-9_]/g, "_"));

export function median(v: number[]): number {
  const s = [...v].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

/** One row of one point over its repetitions. */
export interface Group {
  /** What names it across campaigns: the point's coordinates and the row's stage and shape. */
  key: string;
  first: CampaignRow;
  /** Each repetition's row. */
  rows: CampaignRow[];
}

const AXES = ["job", "backend", "world_size", "hosts", "variant"] as const;
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
}

/** Per job, stage, size and world size: the series with the highest median busbw, and by how much it leads. */
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
    return { job: r.job, stage: r.stage, op: r.op, size: r.size, world_size: r.world_size, best: best!.series, value: best!.value, runnerUp: next?.series, margin: next && next.value > 0 ? best!.value / next.value - 1 : undefined };
  });
}

export interface Change {
  key: string;
  row: CampaignRow;
  metric: string;
  before: number;
  after: number;
  /** How much better (> 0) or worse (< 0), as a fraction, whichever way the metric is better. */
  gain: number;
  interval?: [number, number];
  verdict: "regression" | "improvement" | "within tolerance" | "within noise" | "wrong elements";
}

/** For each metric and each row both campaigns have: whether it got better or worse beyond tolerance and noise. */
export function compareCampaigns(before: Group[], after: Group[], metrics: Record<string, "higher" | "lower">, tolerance: Record<string, number>, defaultTolerance: number): Change[] {
  const earlier = new Map(before.map((g) => [g.key, g]));
  const out: Change[] = [];
  for (const a of after) {
    const b = earlier.get(a.key);
    if (!b) continue;
    for (const [metric, direction] of Object.entries(metrics)) {
      const column = metricColumn(metric);
      const [bv, av] = [values(b, column), values(a, column)];
      if (!bv.length || !av.length) continue;
      const [mb, ma] = [median(bv), median(av)];
      const ratio = ma / mb;
      const gain = direction === "higher" ? ratio - 1 : 1 / ratio - 1;
      const base = { key: a.key, row: a.first, metric, before: mb, after: ma, gain };
      const wrong = a.rows.reduce((n, r) => n + (r.wrong ?? 0), 0);
      if (wrong > 0) out.push({ ...base, verdict: "wrong elements" });
      else if (!Number.isFinite(gain) || Math.abs(gain) <= (tolerance[metric] ?? defaultTolerance)) out.push({ ...base, verdict: "within tolerance" });
      else {
        // Only a change that the repetitions' own spread cannot explain: the ratio's interval excludes 1.
        const interval = bv.length > 1 || av.length > 1 ? bootstrapRatio(bv, av) : undefined;
        const noise = interval !== undefined && interval[0] <= 1 && interval[1] >= 1;
        out.push({ ...base, interval, verdict: noise ? "within noise" : gain < 0 ? "regression" : "improvement" });
      }
    }
  }
  return out;
}

export const isRegression = (c: Change) => c.verdict === "regression" || c.verdict === "wrong elements";

export const describeRow = (r: CampaignRow) => `${r.job} ${r.stage} (${r.op}) size ${r.size} W=${r.world_size} ${r.backend}/${r.variant}${r.hosts > 1 ? ` ${r.hosts} hosts` : ""}`;

/** The changes as text, regressions first, one line each; rows within tolerance are only counted. */
export function formatChanges(changes: Change[]): string {
  const order = ["wrong elements", "regression", "improvement", "within noise"];
  const shown = changes.filter((c) => c.verdict !== "within tolerance").sort((x, y) => order.indexOf(x.verdict) - order.indexOf(y.verdict));
  const lines = shown.map((c) => {
    const range = c.interval ? ` (95% interval of B/A ${c.interval[0].toFixed(3)}..${c.interval[1].toFixed(3)})` : "";
    return `${c.verdict.toUpperCase().padEnd(16)} ${c.metric.padEnd(12)} ${describeRow(c.row)}: ${c.before.toPrecision(4)} -> ${c.after.toPrecision(4)} (${(Math.abs(c.gain) * 100).toFixed(1)}% ${c.gain >= 0 ? "better" : "worse"})${range}`;
  });
  const regressions = changes.filter(isRegression).length, improvements = changes.filter((c) => c.verdict === "improvement").length;
  return [...lines, `# ${regressions} regression${regressions === 1 ? "" : "s"}, ${improvements} improvement${improvements === 1 ? "" : "s"} over ${changes.length} comparisons`].join("\n") + "\n";
}
