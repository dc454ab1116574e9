import type { Stage } from "../config/job.js";
import { inputCount, nativeReduction, type StageKind } from "./stage-kind.js";

type S = Extract<Stage, { op: "reduce" }>;

export const reduce: StageKind<S> = {
  op: "reduce",
  busFactor: () => 1,
  count: inputCount,
  toNative: (s, ctx) => ({
    kind: "reduce",
    inputs: [ctx.tensorIndex(s.input)],
    root: s.root,
    algorithm: s.algorithm,
    ...nativeReduction(s.reduce),
  }),
};
