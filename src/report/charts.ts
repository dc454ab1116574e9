import * as vega from "vega";
import * as vl from "vega-lite";
import type { DoctorResult, ResultRow } from "../results.js";
import { stageCell } from "./table.js";

type Spec = vl.TopLevelSpec;

const base = { width: 560, height: 300, background: "white" } as const;

/**
 * A line of the bandwidth chart: a stage at one combination of the swept parameters, as the table names it
 * (`ar[reduce=max]`: one line for sum and max drew vertical zigzags between them), and the algorithm that ran,
 * said as a fallback where the sweep asked for another (a tree all_gather that ran `shared`).
 */
function seriesName(r: ResultRow): string {
  const asked = r.params?.algorithm;
  const ran = asked !== undefined && asked !== "auto" && asked !== r.algorithm ? `${r.algorithm} fallback` : r.algorithm;
  return `${stageCell(r)} (${ran})`;
}

/** busbw against message size per stage: size on a log axis, busbw on a symlog one (one point per stage without a sweep). */
function bandwidthSpec(rows: ResultRow[]): Spec | undefined {
  const values = rows.filter((r) => r.size > 0).map((r) => ({ stage: seriesName(r), size: r.size, busbw: r.busbw }));
  if (!values.length) return undefined;
  return {
    ...base,
    title: "Bus bandwidth by message size",
    data: { values },
    mark: { type: "line", point: true },
    encoding: {
      x: { field: "size", type: "quantitative", title: "size (bytes)", scale: { type: "log" } },
      y: { field: "busbw", type: "quantitative", title: "busbw (GB/s)", scale: { type: "symlog" } },
      color: { field: "stage", type: "nominal", legend: { labelLimit: 400 } },
    },
  };
}

/** Rows stage by stage (in the order they first come), sizes in numeric order: as strings "@1048576" sorts before "@16384". */
function inSizeOrder(rows: ResultRow[]): ResultRow[] {
  const stages = [...new Set(rows.map((r) => r.stage))];
  return [...rows].sort((a, b) => stages.indexOf(a.stage) - stages.indexOf(b.stage) || a.count - b.count);
}

/** Relative error per step for estimating stages (compressed/quantized), with the running mean's. */
function errorSpec(rows: ResultRow[]): Spec | undefined {
  const ordered = inSizeOrder(rows.filter((r) => r.rel_error_by_step?.length || r.running_mean_rel_error_by_step?.length));
  const series = (r: ResultRow, what: string) => `${r.stage} @${r.count}: ${what}`;
  const values = ordered.flatMap((r) => [
    ...(r.rel_error_by_step ?? []).map((e, step) => ({ series: series(r, "per step"), step, error: e })),
    ...(r.running_mean_rel_error_by_step ?? []).map((e, step) => ({ series: series(r, "running mean"), step, error: e })),
  ]).filter((v) => v.error !== null && v.error > 0);
  if (!values.length) return undefined;
  return {
    ...base,
    title: "Relative error vs the exact result",
    data: { values },
    mark: { type: "line", point: false },
    encoding: {
      x: { field: "step", type: "quantitative", title: "step (warmup included)" },
      y: { field: "error", type: "quantitative", title: "‖out − exact‖ / ‖exact‖", scale: { type: "log" } },
      color: { field: "series", type: "nominal", sort: [...new Set(values.map((v) => v.series))], legend: { labelLimit: 280 } },
    },
  };
}

/** OSU overlap of nonblocking stages. */
function overlapSpec(rows: ResultRow[]): Spec | undefined {
  const values = inSizeOrder(rows.filter((r) => r.overlap)).map((r) => ({ stage: `${r.stage} @${r.count}`, overlap: r.overlap!.overlap_pct }));
  if (!values.length) return undefined;
  return {
    ...base,
    height: Math.max(60, 28 * values.length),
    title: "Communication/computation overlap (OSU)",
    data: { values },
    mark: "bar",
    encoding: {
      y: { field: "stage", type: "nominal", title: null, sort: [...new Set(values.map((v) => v.stage))] },
      x: { field: "overlap", type: "quantitative", title: "overlap (%)", scale: { domain: [0, 100] } },
    },
  };
}

const TIMELINE_WIDTH = 560;
/** About what one character of the timeline's 10 px labels takes. */
const LABEL_CHAR_PX = 6;

/** A bar's label cut to what fits inside it (the legend names every colour), so labels never run into the next bar. */
function fitLabel(stage: string, px: number): string {
  const chars = Math.floor((px - 6) / LABEL_CHAR_PX);
  return stage.length <= chars ? stage : chars >= 3 ? `${stage.slice(0, chars - 1)}…` : "";
}

/** A replayed trace: each stage's measured time beside the trace's own (its rows' trace_us). */
function traceSpec(rows: ResultRow[]): Spec | undefined {
  const traced = rows.filter((r) => r.trace_us !== undefined);
  const values = traced.flatMap((r) => [
    { stage: r.stage, source: "replay", us: r.time.avg_us },
    { stage: r.stage, source: "trace", us: r.trace_us! },
  ]);
  if (!values.length) return undefined;
  return {
    ...base,
    height: Math.max(60, 30 * traced.length),
    title: "Replay against the trace",
    data: { values },
    mark: "bar",
    encoding: {
      y: { field: "stage", type: "nominal", title: null, sort: null },
      yOffset: { field: "source" },
      x: { field: "us", type: "quantitative", title: "time (us)" },
      color: { field: "source", type: "nominal", title: null },
    },
  };
}

/**
 * The streams' timeline of a step (Gantt), per sweep point of concurrent stages: each stage from its start to
 * its end after the step's start (slowest rank, mean over steps), one lane per stream.
 */
function timelineSpec(rows: ResultRow[]): Spec | undefined {
  const timed = rows.filter((r) => r.graph && r.start_us !== undefined);
  // Rows come point by point in schedule order, so each point starts again at the first stage.
  let point = 0;
  const values = timed.map((r) => {
    if (r.stage === timed[0]!.stage) point++;
    const g = r.graph!;
    return {
      stream: r.stream ?? "main",
      stage: r.stage,
      point: `point ${point}: step ${(g.step_us / 1e3).toFixed(1)} ms, overlap ${g.overlap_pct.toFixed(0)}%`,
      start: r.start_us! / 1e3,
      end: (r.start_us! + r.time.avg_us) / 1e3,
    };
  });
  if (!values.length) return undefined;
  // The facets share one x scale, from 0 to the latest end exactly (not rounded up), so a bar's width is known here.
  const last = Math.max(...values.map((v) => v.end));
  const msPerPx = last / TIMELINE_WIDTH;
  const labelled = values.map((v) => ({ ...v, label: fitLabel(v.stage, (v.end - v.start) / msPerPx) }));
  return {
    background: "white",
    title: "Step timeline by stream",
    data: { values: labelled },
    facet: { row: { field: "point", type: "nominal", title: null, header: { labelAngle: 0, labelAlign: "left", labelOrient: "top" } } },
    spec: {
      width: TIMELINE_WIDTH,
      height: { step: 26 },
      layer: [
        { mark: { type: "bar", cornerRadius: 2 }, encoding: { x2: { field: "end" }, color: { field: "stage", type: "nominal", title: "stage", sort: [...new Set(values.map((v) => v.stage))] } } },
        { mark: { type: "text", align: "left", dx: 3, color: "white", fontSize: 10 }, encoding: { text: { field: "label" } } },
      ],
      encoding: {
        y: { field: "stream", type: "nominal", title: null },
        x: { field: "start", type: "quantitative", title: "ms after the step's start", scale: { domain: [0, last], nice: false } },
      },
    },
  } as Spec;
}

async function toSvg(spec: Spec): Promise<string> {
  const view = new vega.View(vega.parse(vl.compile(spec).spec), { renderer: "none" });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/** Vega-Lite specs as standalone SVG strings (the campaign report's charts, drawn here with vega). */
export async function renderSpecs(specs: Spec[]): Promise<string[]> {
  return Promise.all(specs.map(toSvg));
}

/** The report's charts as standalone SVG strings (rendered here, so the page needs nothing online). */
export async function renderCharts(rows: ResultRow[]): Promise<string[]> {
  const specs = [bandwidthSpec(rows), errorSpec(rows), overlapSpec(rows), timelineSpec(rows), traceSpec(rows)].filter((s): s is Spec => s !== undefined);
  return Promise.all(specs.map(toSvg));
}

/** The cells of the bandwidth map an outlier stands for: a link's two, a slow host's row and column, or every link. */
function outlierCells(d: DoctorResult): Set<string> {
  const cells = new Set<string>();
  const link = (a: string, b: string) => cells.add(`${a}|${b}`).add(`${b}|${a}`);
  for (const o of d.outliers) {
    if (o.kind === "link") link(o.hosts[0], o.hosts[1]);
    else if (o.kind === "host" && o.against === "within") link(o.host, o.host);
    else for (const h of d.hosts) for (const g of d.hosts) if (h !== g && (o.kind === "network" || h === o.host)) link(h, g);
  }
  return cells;
}

/** Cells' values are written in them up to this many hosts. */
const LABELLED_UP_TO = 12;

/**
 * doctor's host x host matrix as a heat map (diagonal: within the host; blank: not measured). Colours run
 * from 0, not from the lowest value, so that equal links look equal; outliers are outlined in red.
 */
function heatmapSpec(d: DoctorResult, key: "bandwidth_gbps" | "latency_us", title: string, scheme: "viridis" | "inferno"): Spec {
  const marked = key === "bandwidth_gbps" ? outlierCells(d) : new Set<string>();
  const values = d.hosts
    .flatMap((a, i) => d.hosts.map((b, j) => ({ a, b, value: d[key][i]![j], outlier: marked.has(`${a}|${b}`) })))
    .filter((v) => v.value !== null);
  const top = Math.max(0, ...values.map((v) => v.value!));
  const side = Math.max(160, 40 * d.hosts.length);
  return {
    ...base,
    width: side,
    height: side,
    title: { text: title, ...(marked.size && { subtitle: "red outline: an outlier" }) },
    data: { values },
    encoding: {
      x: { field: "b", type: "nominal", title: null, sort: d.hosts },
      y: { field: "a", type: "nominal", title: null, sort: d.hosts },
    },
    layer: [
      {
        mark: "rect",
        encoding: {
          color: { field: "value", type: "quantitative", title: null, scale: { scheme, domainMin: 0 } },
          tooltip: [{ field: "a" }, { field: "b" }, { field: "value", format: ".3f" }, { field: "outlier" }],
        },
      },
      { transform: [{ filter: "datum.outlier" }], mark: { type: "rect", filled: false, stroke: "#e00", strokeWidth: 3 } },
      ...(d.hosts.length <= LABELLED_UP_TO ? [{
        mark: { type: "text", fontSize: 10 },
        encoding: {
          text: { field: "value", type: "quantitative", format: key === "bandwidth_gbps" ? ".3f" : ".1f" },
          // Both schemes are dark at 0.
          color: { condition: { test: `datum.value < ${top / 2}`, value: "white" }, value: "black" },
        },
      }] : []),
    ],
  } as Spec;
}

/** doctor's bandwidth and latency heat maps as standalone SVG strings. */
export async function renderDoctorCharts(d: DoctorResult): Promise<string[]> {
  return Promise.all([
    heatmapSpec(d, "bandwidth_gbps", "Bandwidth between hosts (GB/s)", "viridis"),
    heatmapSpec(d, "latency_us", "Latency between hosts (us)", "inferno"),
  ].map(toSvg));
}
