import type { NativeOpOf } from "../comm/native.js";
import type { Stage } from "../config/job.js";
import { inputCount, nativeInput, ringFactor, type PlanContext, type StageKind } from "./stage-kind.js";

type Gather = Extract<Stage, { op: "gather" }>;
type IGather = Extract<Stage, { op: "igather" }>;

const count = (s: Gather | IGather, ctx: PlanContext) => ctx.worldSize * inputCount(s, ctx);
// igather moves the same bytes on a stream of its own (graph/groups.ts streamOf), so it completes later.
const toNative = (s: Gather | IGather, ctx: PlanContext): NativeOpOf => ({ kind: "gather", inputs: nativeInput(s, ctx), root: s.root });

export const gather: StageKind<Gather> = { op: "gather", busFactor: ringFactor, count, toNative };
export const igather: StageKind<IGather> = { op: "igather", busFactor: ringFactor, count, toNative };
