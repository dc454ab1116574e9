import type { Stage } from "../config/job.js";
import { inPlace, inputCount, nativeInput, ringFactor, type StageKind } from "./stage-kind.js";

type S = Extract<Stage, { op: "all_to_all" }>;

export const allToAll: StageKind<S> = {
  op: "all_to_all",
  busFactor: ringFactor,
  count: inputCount,
  toNative: (s, ctx) => ({ kind: "all_to_all", inputs: nativeInput(s, ctx), ...inPlace(s) }),
};
