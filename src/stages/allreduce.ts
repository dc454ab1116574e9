import type { Stage } from "../config/job.js";
import { allreduceFactor, inputCount, nativeReduction, type StageKind } from "./stage-kind.js";

type S = Extract<Stage, { op: "allreduce" }>;

export const allreduce: StageKind<S> = {
  op: "allreduce",
  busFactor: allreduceFactor,
  count: inputCount,
  toNative: (s, ctx) => ({ kind: "allreduce", inputs: [ctx.tensorIndex(s.input)], algorithm: s.algorithm, ...nativeReduction(s.reduce) }),
};
