import type { Stage } from "../config/job.js";
import { inPlace, inputCount, nativeInput, nativeReduction, type StageKind } from "./stage-kind.js";

type S = Extract<Stage, { op: "reduce" }>;

export const reduce: StageKind<S> = {
  op: "reduce",
  busFactor: () => 1,
  count: inputCount,
  toNative: (s, ctx) => ({
    kind: "reduce",
    inputs: nativeInput(s, ctx),
    root: s.root,
    ...nativeReduction(s.reduce),
    ...inPlace(s),
  }),
};
