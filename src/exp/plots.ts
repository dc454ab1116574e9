// The campaign report's charts as Vega-Lite specs; report/charts.ts draws them (vega stays out of the rank path).
import type { TopLevelSpec } from "vega-lite";
import { median, seriesOf, values, type Group } from "./analyze.js";

type Spec = TopLevelSpec;

/** A size axis's labels in B, KiB, MiB and GiB (config/size.ts's formatSize, as a Vega expression). */
const SIZE_LABEL = ["GiB", "MiB", "KiB"].reduceRight(
  (rest, unit, i) => `datum.value >= ${2 ** (10 * (3 - i))} ? format(datum.value / ${2 ** (10 * (3 - i))}, "~r") + " ${unit}" : ${rest}`,
  `datum.value + " B"`,
);

/**
 * A stage at one combination of its swept parameters (the index's params_* columns): "ar[reduce=max]", one line
 * of a chart each, where sum and max drawn as one line zigzagged between them.
 */
function lineOf(r: Group["first"]): string {
  const swept = Object.keys(r).filter((k) => k.startsWith("params_") && r[k] !== null && r[k] !== undefined).sort().map((k) => `${k.slice("params_".length)}=${String(r[k])}`);
  return swept.length ? `${r.stage}[${swept.join(",")}]` : r.stage;
}

const spread = (g: Group) => {
  const v = values(g, "busbw");
  return { median: median(v), lo: Math.min(...v), hi: Math.max(...v) };
};

/** busbw against size for one op: a panel per world size, a colour per series, the band is min..max over repetitions. */
function bandwidthSpec(op: string, groups: Group[], axes: readonly string[]): Spec {
  const data = groups.map((g) => ({ series: seriesOf(g.first, axes), stage: lineOf(g.first), size: g.first.size, world_size: g.first.world_size, ...spread(g) }));
  const x = { field: "size", type: "quantitative", title: "size", scale: { type: "log", base: 2 }, axis: { labelExpr: SIZE_LABEL, labelOverlap: true } } as const;
  return {
    background: "white",
    title: `${op}: busbw by size (median, band: min..max over repetitions)`,
    data: { values: data },
    facet: { column: { field: "world_size", type: "ordinal", title: "world size" } },
    spec: {
      width: 260, height: 200,
      layer: [
        { mark: { type: "area", opacity: 0.25 }, encoding: { x, y: { field: "lo", type: "quantitative" }, y2: { field: "hi" }, color: { field: "series", type: "nominal" }, detail: { field: "stage" } } },
        { mark: { type: "line", point: true }, encoding: { x, y: { field: "median", type: "quantitative", title: "busbw (GB/s)" }, color: { field: "series", type: "nominal", legend: { labelLimit: 280 } }, detail: { field: "stage" } } },
      ],
    },
  } as Spec;
}

/** busbw at each stage's largest size at each world size (its sweep's top) against world size, a panel per op. */
function scalingSpec(groups: Group[], axes: readonly string[]): Spec | undefined {
  const at = (g: Group) => `${g.first.stage} ${g.first.world_size}`;
  const largest = new Map<string, number>();
  for (const g of groups) largest.set(at(g), Math.max(largest.get(at(g)) ?? 0, g.first.size));
  const data = groups.filter((g) => g.first.size === largest.get(at(g)))
    .map((g) => ({ op: g.first.op, stage: lineOf(g.first), series: seriesOf(g.first, axes), world_size: g.first.world_size, ...spread(g) }));
  if (new Set(data.map((d) => d.world_size)).size < 2) return undefined;
  return {
    background: "white",
    title: "Scaling: busbw at each stage's largest size by world size (bars: min..max)",
    data: { values: data },
    facet: { column: { field: "op", type: "nominal", title: null } },
    spec: {
      width: 220, height: 200,
      layer: [
        { mark: { type: "errorbar" }, encoding: { x: { field: "world_size", type: "ordinal" }, y: { field: "lo", type: "quantitative", title: "busbw (GB/s)" }, y2: { field: "hi" }, color: { field: "series", type: "nominal" } } },
        { mark: { type: "line", point: true }, encoding: { x: { field: "world_size", type: "ordinal", title: "world size" }, y: { field: "median", type: "quantitative", title: "busbw (GB/s)" }, color: { field: "series", type: "nominal" }, detail: { field: "stage" } } },
      ],
    },
  } as Spec;
}

/** Every chart of the campaign: one bandwidth chart per op that moves bytes, then the scaling plot. */
export function campaignSpecs(groups: Group[], axes: readonly string[]): Spec[] {
  const sized = groups.filter((g) => g.first.size > 0 && values(g, "busbw").length > 0);
  const ops = [...new Set(sized.map((g) => g.first.op))];
  const scaling = scalingSpec(sized, axes);
  return [...ops.map((op) => bandwidthSpec(op, sized.filter((g) => g.first.op === op), axes)), ...(scaling ? [scaling] : [])];
}
