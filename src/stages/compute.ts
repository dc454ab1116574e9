import type { Stage } from "../config/job.js";
import type { StageKind } from "./stage-kind.js";

type S = Extract<Stage, { op: "compute" }>;

/** Busy work of a given length, so overlap experiments have something to hide communication behind. */
export const compute: StageKind<S> = {
  op: "compute",
  busFactor: () => 0,
  count: () => 0,
  toNative: (s) => ({ kind: "compute", inputs: [], computeUs: s.us }),
};
