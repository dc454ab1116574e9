import { readFileSync } from "node:fs";
import { z } from "zod";
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
const documentSchema = z.looseObject({ job: z.string(), world_size: z.number(), results: z.array(rowSchema) });
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
  before?: Row;
  after?: Row;
  /** after / before of busbw (or of 1/time for rows that move no bytes): > 1 is faster. */
  ratio?: number;
  regression: string | undefined;
}

const keyOf = (r: Row) => `${r.stage} ${r.op} ${r.count} ${r.type ?? "-"} ${r.redop ?? "-"} ${r.root ?? "-"}`;

/** Rows matched by stage and shape; a slowdown beyond `threshold` (a fraction), wrong elements or a missing row regress. */
export function compareResults(before: Row[], after: Row[], threshold: number): Comparison[] {
  const later = new Map(after.map((r) => [keyOf(r), r]));
  const out: Comparison[] = before.map((b) => {
    const key = keyOf(b);
    const a = later.get(key);
    later.delete(key);
    if (!a) return { key, before: b, regression: "missing in the second run" };
    const ratio = b.size > 0 ? a.busbw / b.busbw : b.time.avg_us / a.time.avg_us;
    let regression: string | undefined;
    if ((a.wrong ?? 0) > 0) regression = `${a.wrong} wrong elements`;
    else if (Number.isFinite(ratio) && ratio < 1 - threshold) regression = `${((1 - ratio) * 100).toFixed(1)}% slower`;
    return { key, before: b, after: a, ratio, regression };
  });
  for (const [key, a] of later) out.push({ key, after: a, regression: undefined });
  return out;
}

export function formatComparison(rows: Comparison[], threshold: number): string {
  const cell = (v: number | undefined, d = 2) => (v === undefined || !Number.isFinite(v) ? "-" : v.toFixed(d));
  const lines = [
    `# ${"stage".padEnd(16)} ${"op".padEnd(14)} ${"count".padStart(12)} ${"busbw A".padStart(9)} ${"busbw B".padStart(9)} ${"time A".padStart(10)} ${"time B".padStart(10)} ${"B/A".padStart(6)}  verdict`,
    ...rows.map((c) => {
      const r = (c.before ?? c.after)!;
      const verdict = c.regression ? `REGRESSION: ${c.regression}` : c.before ? "ok" : "new in the second run";
      return `  ${r.stage.padEnd(16)} ${r.op.padEnd(14)} ${String(r.count).padStart(12)} ${cell(c.before?.busbw).padStart(9)} ${cell(c.after?.busbw).padStart(9)} ${cell(c.before?.time.avg_us).padStart(10)} ${cell(c.after?.time.avg_us).padStart(10)} ${cell(c.ratio, 3).padStart(6)}  ${verdict}`;
    }),
  ];
  const regressions = rows.filter((c) => c.regression).length;
  lines.push(`# ${regressions} regression${regressions === 1 ? "" : "s"} (threshold ${(threshold * 100).toFixed(1)}%)`);
  return lines.join("\n") + "\n";
}
