import type { Stage } from "../config/job.js";
import { inputCount, nativeInput, type StageKind } from "./stage-kind.js";

type S = Extract<Stage, { op: "send_recv" }>;

export const sendRecv: StageKind<S> = {
  op: "send_recv",
  busFactor: () => 1,
  count: inputCount,
  toNative: (s, ctx) => ({ kind: "send_recv", inputs: nativeInput(s, ctx), shift: s.shift, peer: null }),
};
