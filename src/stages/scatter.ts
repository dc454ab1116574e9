import type { Stage } from "../config/job.js";
import { inputCount, nativeInput, ringFactor, type StageKind } from "./stage-kind.js";

type S = Extract<Stage, { op: "scatter" }>;

export const scatter: StageKind<S> = {
  op: "scatter",
  busFactor: ringFactor,
  count: inputCount,
  toNative: (s, ctx) => ({ kind: "scatter", inputs: nativeInput(s, ctx), root: s.root }),
};
