import type { Stage } from "../config/job.js";
import { inputCount, type StageKind } from "./stage-kind.js";

type S = Extract<Stage, { op: "send_recv" }>;

export const sendRecv: StageKind<S> = {
  op: "send_recv",
  busFactor: () => 1,
  count: inputCount,
  toNative: (s, ctx) => ({ kind: "send_recv", inputs: [ctx.tensorIndex(s.input)], shift: s.shift, algorithm: s.algorithm }),
};
