import type { Stage } from "../config/job.js";
import { inPlace, inputCount, nativeInput, ringFactor, type StageKind } from "./stage-kind.js";

type S = Extract<Stage, { op: "all_gather" }>;

export const allGather: StageKind<S> = {
  op: "all_gather",
  busFactor: ringFactor,
  count: (s, ctx) => ctx.worldSize * inputCount(s, ctx),
  toNative: (s, ctx) => ({ kind: "all_gather", inputs: nativeInput(s, ctx), ...inPlace(s) }),
};
