// `exp report`: one self-contained HTML file (and its Markdown twin) for the whole campaign: what differs
// between points, every row in a sortable table, busbw by size per op, scaling, the crossover table, and the
// changes against a baseline.
import path from "node:path";
import { readInputText } from "../config/read-input.js";
import { formatSize } from "../config/size.js";
import { repetitionMetric } from "../metrics/verdict.js";
import { escape as escapeHtml } from "../report/html.js";
import type { ResultDocument } from "../results.js";
import { campaignRows, crossovers, describeRow, groupRows, median, seriesAxes, seriesOf, values, type CampaignComparison, type CampaignRow, type Crossover, comparisonFails, headline, shownChanges } from "./analyze.js";
import { repDir } from "./campaign.js";
import { campaignSpecs } from "./plots.js";
import { describeParams, type Params } from "./plan.js";
import type { Database, PointRow } from "./store.js";

const TABLE_COLUMNS = ["point_id", "rep", "job", "backend", "world_size", "hosts", "variant", "stage", "op", "size", "count", "type", "algorithm",
  "avg_us", "p50_us", "p99_us", "algbw", "busbw", "wrong", "rel_error"];

/**
 * Variables a launcher sets afresh for every launch (its address, job and step ids, ports): they differ
 * between any two points, so they would fill "What differs" while saying nothing about the points.
 */
const PER_LAUNCH = /^(OMPI_MCA_(orte_hnp_uri|orte_ess_|ess_base_|pmix|orte_precondition|orte_launch|orte_app_num|orte_top_session_dir|orte_jobfam_session_dir|initial_wdir)|OMPI_(COMM_WORLD_|FILE_LOCATION|UNIVERSE_SIZE|FIRST_RANKS|APP_CTX_)|PMIX_|PMI_|SLURM_(JOB_?ID|STEP_|STEPID|ARRAY_|TASK_PID|PROCID|LOCALID|NODEID|SRUN_COMM_|LAUNCH_NODE_IPADDR|TOPOLOGY_ADDR|PRIO_PROCESS|SUBMIT_DIR|JOB_START_TIME|JOB_END_TIME|CPU_BIND|GTIDS|UMASK)|MASTER_PORT$|SPMD_LAUNCHER_PID$|TMPDIR$)/;

/** Each point's coordinates, env (less per-launch variables) and manifest leaves: "backend", "env.NCCL_ALGO", "manifest.node". */
function pointFacts(dir: string, db: Database): Map<string, Map<string, string>> {
  const facts = new Map<string, Map<string, string>>();
  const points = db.prepare("SELECT p.*, (SELECT min(rep) FROM rows r WHERE r.point_id = p.point_id) AS rep FROM points p").all() as (Record<string, unknown> & { point_id: string; rep: number | null })[];
  for (const p of points) {
    const f = new Map<string, string>(["job", "backend", "world_size", "hosts", "variant", "executor"].map((k) => [k, String(p[k])]));
    for (const e of db.prepare("SELECT key, value FROM env WHERE point_id = ?").all(p.point_id) as { key: string; value: string }[]) {
      if (!PER_LAUNCH.test(e.key)) f.set(`env.${e.key}`, e.value);
    }
    if (p.rep !== null) {
      try {
        const m = (JSON.parse(readInputText(path.join(repDir(dir, p.point_id, p.rep), "results.json"))) as ResultDocument).manifest;
        for (const k of ["runner", "git", "node", "library"] as const) f.set(`manifest.${k}`, String(m?.[k] ?? ""));
        f.set("manifest.addon", JSON.stringify(m?.addon ?? null));
        f.set("manifest.hosts", (m?.hosts ?? []).map((h) => h.name).join(","));
      } catch {
        // a repetition whose results went missing: its coordinates still count
      }
    }
    facts.set(p.point_id, f);
  }
  return facts;
}

/** The facts that differ between points (with their values) and those every point shares. */
export function differences(dir: string, db: Database): { varying: [string, string[]][]; same: [string, string][] } {
  const facts = [...pointFacts(dir, db).values()];
  const keys = [...new Set(facts.flatMap((f) => [...f.keys()]))].sort();
  // A point with no results (failed) lacks what only results record (manifest, launch env): no difference.
  const measured = (f: Map<string, string>) => f.has("manifest.runner");
  const varying: [string, string[]][] = [], same: [string, string][] = [];
  for (const k of keys) {
    const seen = [...new Set(facts.filter((f) => f.has(k) || measured(f)).map((f) => f.get(k) ?? "(absent)"))];
    if (seen.length > 1) varying.push([k, seen]);
    else same.push([k, seen[0]!]);
  }
  return { varying, same };
}

/** A size shown for people (4 KiB) that still sorts as its number of bytes. */
class Bytes {
  constructor(readonly bytes: number) {}
  toString = () => formatSize(this.bytes);
}

const cell = (v: unknown) => (v === null || v === undefined ? "" : typeof v === "number" && !Number.isInteger(v) ? v.toPrecision(5) : String(v));
const sortKey = (v: unknown) => (typeof v === "number" ? v : v instanceof Bytes ? v.bytes : undefined);

function htmlTable(head: string[], rows: unknown[][], sortable: boolean): string {
  const th = head.map((h) => `<th>${escapeHtml(h)}</th>`).join("");
  const body = rows.map((r) => `<tr>${r.map((v) => `<td${sortKey(v) !== undefined ? ` data-v="${sortKey(v)}"` : ""}>${escapeHtml(cell(v))}</td>`).join("")}</tr>`).join("\n");
  return `<table${sortable ? ' class="sortable"' : ""}><thead><tr>${th}</tr></thead><tbody>\n${body}\n</tbody></table>`;
}

/** Text as Markdown shows it literally: no HTML, links, emphasis or code from env values and paths; one line. */
const escapeMarkdown = (text: string) => text.replace(/[\\`*_{}[\]()<>#+!|&~]/g, (c) => `\\${c}`).replace(/\r?\n/g, " ");

function markdownTable(head: string[], rows: unknown[][]): string {
  const line = (r: unknown[]) => `| ${r.map((v) => escapeMarkdown(cell(v))).join(" | ")} |`;
  return [line(head), line(head.map(() => "---")), ...rows.map(line)].join("\n");
}

const pct = (x: number | undefined) => (x === undefined ? "" : `${(x * 100).toFixed(1)}%`);
const crossoverHead = ["job", "stage", "op", "size", "world size", "best", "busbw (GB/s)", "runner-up", "lead"];
const crossoverRows = (c: Crossover[]) => c.map((x) => [x.job, x.stage, x.op, new Bytes(x.size), x.world_size, x.best, x.value, x.runnerUp ?? "", `${pct(x.margin)}${x.doubt ? ` (${x.doubt})` : ""}`]);
// The values the verdict is taken on, and the change is their ratio (metrics/verdict.ts, repetitionMetric).
const changeHead = ["verdict", "metric (at each repetition's fastest iteration)", "row", "baseline (median)", "this (median)", "change"];
/**
 * The changes beyond tolerance, regressions first, then the missing points, those whose ranks outnumbered the cores
 * those whose repetitions ran apart or took different copy paths, and the machines the launches measured where more than one.
 */
const changeRows = (c: CampaignComparison) => [
  ...shownChanges(c.changes).map((x) => [x.verdict, repetitionMetric(x.metric), describeRow(x.row), x.before, x.after, `${pct(Math.abs(x.gain))} ${x.gain >= 0 ? "better" : "worse"}`]),
  ...c.missing.map((m) => ["missing", "", m, "", "", ""]),
  ...c.oversubscribed.map(([where, what]) => ["oversubscribed", "", where, "", "", `${what}: measure with ranks <= cores`]),
  ...c.unsteady.map(([where, what]) => ["unsteady", "", where, "", "", `${what}: run more repetitions`]),
  ...c.mixedPaths.map(([where, what]) => ["copy paths", "", where, "", "", `the launches chose ${what}: SPMD_SHM_SINGLE_COPY=fixed keeps them the same`]),
  ...(c.machines ? [["machines", "", "core round trips", "", "", `${c.machines}: rows judged on a machine both measured`]] : []),
];

/** One row per point and stage and size: the medians over repetitions, for the Markdown summary. */
function medianRows(rows: CampaignRow[]): unknown[][] {
  const axes = seriesAxes(rows);
  return groupRows(rows).map((g) => [g.first.job, g.first.stage, g.first.op, new Bytes(g.first.size), g.first.world_size, seriesOf(g.first, axes), g.rows.length, median(values(g, "busbw")), median(values(g, "avg_us"))]);
}

const SORT_SCRIPT = `document.querySelectorAll("table.sortable th").forEach((th, i) => th.addEventListener("click", () => {
  const body = th.closest("table").tBodies[0], asc = th.dataset.dir !== "asc";
  th.dataset.dir = asc ? "asc" : "desc";
  const key = (tr) => tr.cells[i].dataset.v ?? tr.cells[i].textContent;
  const rows = [...body.rows].sort((a, b) => {
    const x = key(a), y = key(b), c = a.cells[i].dataset.v !== undefined && b.cells[i].dataset.v !== undefined ? x - y : x.localeCompare(y);
    return asc ? c : -c;
  });
  body.append(...rows);
}));`;

/** The failed points: their parameters and exit code, and their log's last lines. */
function failedPoints(db: Database): { what: string; tail: string }[] {
  const points = db.prepare("SELECT params_json, exit_code, log_tail FROM points WHERE state = 'failed'").all() as Pick<PointRow, "params_json" | "exit_code" | "log_tail">[];
  return points.map((p) => ({ what: `${describeParams(JSON.parse(p.params_json) as Params)}: exit ${p.exit_code ?? "?"}`, tail: p.log_tail ?? "(no log)" }));
}

export interface CampaignReport {
  html: string;
  markdown: string;
}

/** The report of the campaign in `dir` (its index open in `db`), with `changes` against a baseline where one was given. */
export async function campaignReport(name: string, dir: string, db: Database, comparison?: CampaignComparison): Promise<CampaignReport> {
  const rows = campaignRows(db);
  const axes = seriesAxes(rows);
  const groups = groupRows(rows);
  const { renderSpecs } = await import("../report/charts.js");
  const charts = await renderSpecs(campaignSpecs(groups, axes));
  const diff = differences(dir, db);
  const cross = crossovers(groups, axes);
  // A campaign of one series (one backend) has nothing to rank: say so rather than show an empty table.
  const noCrossover = `Each op, size and world size ran one ${axes.join(" / ")}: nothing to rank.`;
  const counts = db.prepare("SELECT state, count(*) AS n FROM points GROUP BY state").all() as { state: string; n: number }[];
  const countLine = counts.map((c) => `${c.n} ${c.state}`).join(", ");
  const varyingItems = diff.varying.map(([k, v]) => [k, v.join(", ")]);
  const failed = failedPoints(db);
  const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${escapeHtml(name)} — spmd-runner campaign</title>
<style>
  body { font-family: system-ui, sans-serif; margin: 2rem; color: #222; background: #fff; }
  h1 { font-size: 1.4rem; } h2 { font-size: 1.1rem; margin-top: 2rem; }
  table { border-collapse: collapse; font-size: 0.8rem; } th, td { border: 1px solid #ddd; padding: 2px 6px; text-align: right; white-space: nowrap; }
  th { background: #f0f0f0; position: sticky; top: 0; } table.sortable th { cursor: pointer; }
  /* A last column may hold a sentence (why a point is unsteady or oversubscribed): it wraps, not the page. */
  td:last-child { white-space: normal; max-width: 36rem; }
  .regression { color: #b00; } .improvement { color: #070; }
  .charts figure { margin: 0 0 1.5rem 0; }
</style>
</head>
<body>
<h1>Campaign ${escapeHtml(name)}</h1>
${comparison ? `<p class="headline ${comparisonFails(comparison) ? "regression" : "improvement"}">Against the baseline: ${escapeHtml(headline(comparison).slice(2))}</p>\n` : ""}<p>${escapeHtml(countLine)} points · ${rows.length} rows · series by ${escapeHtml(axes.join(" / "))}</p>
<h2>What differs between points</h2>
${htmlTable(["", "values"], varyingItems, false)}
<details><summary>Shared by every point</summary>${htmlTable(["", "value"], diff.same, false)}</details>
${failed.length ? `<h2>Failed points</h2>\n${failed.map((f) => `<details open><summary>${escapeHtml(f.what)}</summary><pre>${escapeHtml(f.tail)}</pre></details>`).join("\n")}` : ""}
${comparison ? `<h2>Against the baseline</h2>\n${htmlTable(changeHead, changeRows(comparison), true)}` : ""}
<h2>Charts</h2>
<div class="charts">
${charts.map((svg) => `<figure>${svg}</figure>`).join("\n")}
</div>
<h2>Crossover: the best ${escapeHtml(axes.join(" / "))} per op, size and world size</h2>
${cross.length ? htmlTable(crossoverHead, crossoverRows(cross), true) : `<p>${escapeHtml(noCrossover)}</p>`}
<h2>Every row (click a heading to sort)</h2>
${htmlTable(TABLE_COLUMNS, rows.map((r) => TABLE_COLUMNS.map((c) => r[c])), true)}
<script>${SORT_SCRIPT}</script>
</body>
</html>
`;
  const markdown = [
    `# Campaign ${escapeMarkdown(name)}`, "", ...(comparison ? [`**Against the baseline: ${escapeMarkdown(headline(comparison).slice(2))}**`, ""] : []),
    `${countLine} points, ${rows.length} rows, series by ${escapeMarkdown(axes.join(" / "))}.`, "",
    "## What differs between points", "", markdownTable(["", "values"], varyingItems), "",
    ...(failed.length ? ["## Failed points", "", ...failed.flatMap((f) => [`- ${escapeMarkdown(f.what)}`, "", ...f.tail.split("\n").map((l) => `        ${l}`), ""])] : []),
    ...(comparison ? ["## Against the baseline", "", markdownTable(changeHead, changeRows(comparison)), ""] : []),
    "## Crossover", "", cross.length ? markdownTable(crossoverHead, crossoverRows(cross)) : escapeMarkdown(noCrossover), "",
    "## Medians over repetitions", "", markdownTable(["job", "stage", "op", "size", "world size", "series", "reps", "busbw (GB/s)", "avg (us)"], medianRows(rows)), "",
  ].join("\n");
  return { html, markdown };
}
