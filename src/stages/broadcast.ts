import type { Stage } from "../config/job.js";
import { inPlace, inputCount, nativeInput, type StageKind } from "./stage-kind.js";

type S = Extract<Stage, { op: "broadcast" }>;

export const broadcast: StageKind<S> = {
  op: "broadcast",
  busFactor: () => 1,
  count: inputCount,
  toNative: (s, ctx) => ({ kind: "broadcast", inputs: nativeInput(s, ctx), root: s.root, ...inPlace(s) }),
};
