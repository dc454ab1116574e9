import type { Stage } from "../config/job.js";
import { inPlace, nativeReduction, ringFactor, type PlanContext, type StageKind } from "./stage-kind.js";

type S = Extract<Stage, { op: "reduce_scatter" }>;

const names = (s: S) => s.inputs ?? [s.input!];

export const reduceScatter: StageKind<S> = {
  op: "reduce_scatter",
  busFactor: ringFactor,
  count: (s, ctx: PlanContext) => names(s).reduce((n, t) => n + ctx.job.tensors[t]!.count, 0),
  toNative: (s, ctx) => ({
    kind: "reduce_scatter",
    inputs: names(s).map((t) => ctx.tensorIndex(t)),
    coalesced: s.coalesced,
    compression: null,
    ...nativeReduction(s.reduce),
    ...inPlace(s),
  }),
};
