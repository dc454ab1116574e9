import type { NativeOp } from "../comm/native.js";
import type { Stage } from "../config/job.js";
import { inputCount, ringFactor, type PlanContext, type StageKind } from "./stage-kind.js";

type Gather = Extract<Stage, { op: "gather" }>;
type IGather = Extract<Stage, { op: "igather" }>;

const count = (s: Gather | IGather, ctx: PlanContext) => ctx.worldSize * inputCount(s, ctx);
const toNative = (s: Gather | IGather, ctx: PlanContext): Omit<NativeOp, "stage"> => ({
  kind: "gather",
  inputs: [ctx.tensorIndex(s.input)],
  root: s.root,
  algorithm: s.algorithm,
  // igather moves the same bytes on a stream of its own (graph/groups.ts streamOf), so it completes later.
});

export const gather: StageKind<Gather> = { op: "gather", busFactor: ringFactor, count, toNative };
export const igather: StageKind<IGather> = { op: "igather", busFactor: ringFactor, count, toNative };
