import type { Stage } from "../config/job.js";
import { nativeInput, ringFactor, type PlanContext, type StageKind } from "./stage-kind.js";

type S = Extract<Stage, { op: "all_to_allv" }>;
type Matrix = readonly (readonly number[])[];
/** The job's form (one matrix, or one per group) or native code's (one per group). */
type Counts = Matrix | readonly Matrix[];

/** One matrix per group that runs the stage (one for the whole world): a single matrix serves them all. */
export function countMatrices(counts: Counts, groups: number): Matrix[] {
  if (Array.isArray(counts[0]?.[0])) return [...(counts as readonly Matrix[])];
  return new Array<Matrix>(groups).fill(counts as Matrix);
}

export const rowSums = (m: Matrix) => m.map((row) => row.reduce((a, b) => a + b, 0));
export const columnSums = (m: Matrix) => m.map((_, j) => m.reduce((a, row) => a + row[j]!, 0));
const largest = (ms: Matrix[], sums: (m: Matrix) => number[]) => Math.max(0, ...ms.flatMap(sums));

/** Elements the largest sender sends (its row sum), the largest receiver receives (its column sum). */
export const largestSend = (counts: Counts) => largest(countMatrices(counts, 1), rowSums);
export const largestReceive = (counts: Counts) => largest(countMatrices(counts, 1), columnSums);

/**
 * Rank i sends counts[i][j] elements to rank j. Its busbw is all_to_all's, counted from what the ranks
 * really move: the bytes of the largest send (the row sums of the count matrices, a rank's block to itself
 * included) times (W-1)/W, so that equal counts give all_to_all's figure (DESIGN.md, Stages).
 */
export const allToAllv: StageKind<S> = {
  op: "all_to_allv",
  busFactor: ringFactor,
  count: (s) => largestSend(s.counts),
  toNative: (s, ctx: PlanContext) => ({ kind: "all_to_allv", inputs: nativeInput(s, ctx), counts: countMatrices(s.counts, ctx.groups) }),
};
