import * as vega from "vega";
import * as vl from "vega-lite";
import type { DoctorResult, ResultRow } from "../results.js";

type Spec = vl.TopLevelSpec;

const base = { width: 560, height: 300, background: "white" } as const;

/** busbw against message size per stage, log axes (one point per stage without a sweep). */
function bandwidthSpec(rows: ResultRow[]): Spec | undefined {
  const values = rows.filter((r) => r.size > 0).map((r) => ({ stage: `${r.stage} (${r.algorithm})`, size: r.size, busbw: r.busbw }));
  if (!values.length) return undefined;
  return {
    ...base,
    title: "Bus bandwidth by message size",
    data: { values },
    mark: { type: "line", point: true },
    encoding: {
      x: { field: "size", type: "quantitative", title: "size (bytes)", scale: { type: "log" } },
      y: { field: "busbw", type: "quantitative", title: "busbw (GB/s)", scale: { type: "symlog" } },
      color: { field: "stage", type: "nominal", legend: { labelLimit: 280 } },
    },
  };
}

/** Relative error per step for estimating stages (compressed/quantized), with the running mean's. */
function errorSpec(rows: ResultRow[]): Spec | undefined {
  const values = rows.flatMap((r) => [
    ...(r.rel_error_by_step ?? []).map((e, step) => ({ series: `${r.stage} @${r.count}: per step`, step, error: e })),
    ...(r.running_mean_rel_error_by_step ?? []).map((e, step) => ({ series: `${r.stage} @${r.count}: running mean`, step, error: e })),
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
      color: { field: "series", type: "nominal", legend: { labelLimit: 280 } },
    },
  };
}

/** OSU overlap of nonblocking stages. */
function overlapSpec(rows: ResultRow[]): Spec | undefined {
  const values = rows.filter((r) => r.overlap).map((r) => ({ stage: `${r.stage} @${r.count}`, overlap: r.overlap!.overlap_pct }));
  if (!values.length) return undefined;
  return {
    ...base,
    height: Math.max(60, 28 * values.length),
    title: "Communication/computation overlap (OSU)",
    data: { values },
    mark: "bar",
    encoding: {
      y: { field: "stage", type: "nominal", title: null },
      x: { field: "overlap", type: "quantitative", title: "overlap (%)", scale: { domain: [0, 100] } },
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
  return {
    background: "white",
    title: "Step timeline by stream",
    data: { values },
    facet: { row: { field: "point", type: "nominal", title: null, header: { labelAngle: 0, labelAlign: "left", labelOrient: "top" } } },
    spec: {
      width: 560,
      height: { step: 26 },
      layer: [
        { mark: { type: "bar", cornerRadius: 2 }, encoding: { x2: { field: "end" }, color: { field: "stage", type: "nominal", legend: null } } },
        { mark: { type: "text", align: "left", dx: 3, color: "white" }, encoding: { text: { field: "stage" } } },
      ],
      encoding: {
        y: { field: "stream", type: "nominal", title: null },
        x: { field: "start", type: "quantitative", title: "ms after the step's start" },
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
  const specs = [bandwidthSpec(rows), errorSpec(rows), overlapSpec(rows), timelineSpec(rows)].filter((s): s is Spec => s !== undefined);
  return Promise.all(specs.map(toSvg));
}

/** doctor's host x host matrix as a heat map (diagonal: within the host; blank: not measured). */
function heatmapSpec(d: DoctorResult, key: "bandwidth_gbps" | "latency_us", title: string, scheme: "viridis" | "inferno"): Spec {
  const values = d.hosts.flatMap((a, i) => d.hosts.map((b, j) => ({ a, b, value: d[key][i]![j] }))).filter((v) => v.value !== null);
  const side = Math.max(160, 40 * d.hosts.length);
  return {
    ...base,
    width: side,
    height: side,
    title,
    data: { values },
    mark: "rect",
    encoding: {
      x: { field: "b", type: "nominal", title: null, sort: d.hosts },
      y: { field: "a", type: "nominal", title: null, sort: d.hosts },
      color: { field: "value", type: "quantitative", title: null, scale: { scheme } },
      tooltip: [{ field: "a" }, { field: "b" }, { field: "value", format: ".3f" }],
    },
  };
}

/** doctor's bandwidth and latency heat maps as standalone SVG strings. */
export async function renderDoctorCharts(d: DoctorResult): Promise<string[]> {
  return Promise.all([
    heatmapSpec(d, "bandwidth_gbps", "Bandwidth between hosts (GB/s)", "viridis"),
    heatmapSpec(d, "latency_us", "Latency between hosts (us)", "inferno"),
  ].map(toSvg));
}
