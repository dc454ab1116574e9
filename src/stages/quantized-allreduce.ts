import type { Stage } from "../config/job.js";
import { allreduceFactor, inputCount, nativeReduction, ringFactor, type PlanContext, type StageKind } from "./stage-kind.js";

type S = Extract<Stage, { op: "quantized_allreduce" }>;

const gatherBits = (s: S) => s.gatherBits ?? s.bits;

/** Ranks per node: the stage's own layout (simulating several nodes on one host) or the launcher's. */
export function quantizedLocalSize(s: S, worldSize: number, envLocalSize: number): number {
  if (s.localSize !== undefined) return s.localSize;
  if (s.nodes !== undefined) return worldSize / s.nodes;
  return envLocalSize;
}

/** Blocks of n/W elements, and whole bytes of int4 codes per block (DeepSpeed's numel % 2W rule). */
function fallback(s: S, ctx: PlanContext): string | null {
  const n = inputCount(s, ctx), W = ctx.worldSize;
  const int4 = s.bits === 4 || (s.output === "full" && gatherBits(s) === 4);
  const multiple = W * (int4 ? 2 : 1);
  if (n % multiple === 0) return null;
  const exact = s.output === "full" ? "allreduce" : "reduce_scatter";
  return `count ${n} is not a multiple of ${int4 ? "2W" : "W"} = ${multiple}${int4 ? " (int4 codes pack in pairs)" : ""}; ran the exact ${exact}`;
}

/**
 * ZeRO++ qgZ: a hierarchical reduce-scatter in int8/int4, optionally all-gathered back ("full") so that it
 * stands in for an allreduce. Its busbw is the logical one of the exact collective it replaces; the bytes it
 * really sends come back from native code as wire_bytes. Counts that do not divide run the exact collective.
 */
export const quantizedAllreduce: StageKind<S> = {
  op: "quantized_allreduce",
  busFactor: (w, s) => (s.output === "full" ? allreduceFactor(w) : ringFactor(w)),
  count: inputCount,
  estimates: true,
  fallback,
  toNative: (s, ctx) => {
    const exact = {
      kind: s.output === "full" ? ("allreduce" as const) : ("reduce_scatter" as const),
      inputs: [ctx.tensorIndex(s.input)],
      algorithm: s.algorithm,
      ...nativeReduction(s.reduce),
    };
    if (fallback(s, ctx) !== null) return exact;
    return {
      ...exact,
      compression: "quantized",
      bits: s.bits,
      gatherBits: gatherBits(s),
      groupSize: s.groupSize,
      localSize: quantizedLocalSize(s, ctx.worldSize, ctx.localSize),
      errorFeedback: s.errorFeedback !== undefined,
      beta: s.errorFeedback?.beta ?? 1,
    };
  },
};
