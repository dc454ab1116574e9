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

async function toSvg(spec: Spec): Promise<string> {
  const view = new vega.View(vega.parse(vl.compile(spec).spec), { renderer: "none" });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/** The report's charts as standalone SVG strings (rendered here, so the page needs nothing online). */
export async function renderCharts(rows: ResultRow[]): Promise<string[]> {
  const specs = [bandwidthSpec(rows), errorSpec(rows), overlapSpec(rows)].filter((s): s is Spec => s !== undefined);
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
