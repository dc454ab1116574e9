import type { Stage } from "../config/job.js";
import { allreduceFactor, inPlace, inputCount, nativeInput, nativeReduction, type StageKind } from "./stage-kind.js";

type S = Extract<Stage, { op: "allreduce" }>;

export const allreduce: StageKind<S> = {
  op: "allreduce",
  busFactor: allreduceFactor,
  count: inputCount,
  toNative: (s, ctx) => ({ kind: "allreduce", inputs: nativeInput(s, ctx), compression: null, ...nativeReduction(s.reduce), ...inPlace(s) }),
};
