import type { NativeCompression } from "../comm/native.js";
import type { Stage } from "../config/job.js";
import { allreduceFactor, inputCount, nativeInput, nativeReduction, ringFactor, type PlanContext, type StageKind } from "./stage-kind.js";

type S = Extract<Stage, { op: "quantized_allreduce" }>;

const gatherBits = (s: S) => s.gatherBits ?? s.bits;

/**
 * Where the hierarchy splits: the stage's own layout (simulating nodes on one host, ranks numbered node by
 * node) as ranks per node, or else the hosts the ranks run on, whatever their numbering.
 */
function layout(s: S, ctx: PlanContext): { localSize: number } | { nodeOf: readonly number[] } {
  if (s.localSize !== undefined) return { localSize: s.localSize };
  if (s.nodes !== undefined) return { localSize: ctx.worldSize / s.nodes };
  return { nodeOf: ctx.hostOf };
}

/** Hosts holding unequal numbers of ranks ("3, 1"), when the stage splits by host; undefined when they are equal. */
function unequalHosts(s: S, ctx: PlanContext): string | undefined {
  if (s.localSize !== undefined || s.nodes !== undefined) return undefined;
  const counts = ctx.hostOf.reduce<number[]>((c, h) => ((c[h] = (c[h] ?? 0) + 1), c), []);
  return counts.every((c) => c === counts[0]) ? undefined : counts.join(", ");
}

/** Blocks of n/W elements, and whole bytes of int4 codes per block (DeepSpeed's numel % 2W rule). */
function fallback(s: S, ctx: PlanContext): string | null {
  const exact = s.output === "full" ? "allreduce" : "reduce_scatter";
  const unequal = unequalHosts(s, ctx);
  if (unequal) return `the hosts hold unequal numbers of ranks (${unequal}); ran the exact ${exact}`;
  const n = inputCount(s, ctx), W = ctx.worldSize;
  const int4 = s.bits === 4 || (s.output === "full" && gatherBits(s) === 4);
  const multiple = W * (int4 ? 2 : 1);
  if (n % multiple === 0) return null;
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
    const compression: NativeCompression | null = fallback(s, ctx) !== null ? null : {
      kind: "quantized",
      bits: s.bits,
      gatherBits: gatherBits(s),
      groupSize: s.groupSize,
      layout: layout(s, ctx),
      errorFeedback: s.errorFeedback !== undefined,
      beta: s.errorFeedback?.beta ?? 1,
      pieceGroups: s.pieceGroups ?? 0,
    };
    const common = { inputs: nativeInput(s, ctx), compression, ...nativeReduction(s.reduce), inPlace: false };
    return s.output === "full" ? { kind: "allreduce", ...common } : { kind: "reduce_scatter", coalesced: false, ...common };
  },
};
