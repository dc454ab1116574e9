import type { Stage } from "../config/job.js";
import type { StageKind } from "./stage-kind.js";

type S = Extract<Stage, { op: "barrier" }>;

export const barrier: StageKind<S> = {
  op: "barrier",
  busFactor: () => 0,
  count: () => 0,
  toNative: () => ({ kind: "barrier", inputs: [] }),
};
