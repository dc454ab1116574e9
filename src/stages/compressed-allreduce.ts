import type { Stage } from "../config/job.js";
import { allreduceFactor, inputCount, nativeInput, nativeReduction, type StageKind } from "./stage-kind.js";

type S = Extract<Stage, { op: "compressed_allreduce" }>;

/**
 * 1-bit compressed allreduce with error feedback: an estimate of the mean. Its busbw is the logical one of
 * the exact allreduce it replaces (nccl-tests' allreduce factor on the whole array); the bytes it really
 * sends come back from native code as wire_bytes.
 */
export const compressedAllreduce: StageKind<S> = {
  op: "compressed_allreduce",
  busFactor: allreduceFactor,
  count: inputCount,
  redop: "mean",
  estimates: true,
  toNative: (s, ctx) => ({
    kind: "allreduce",
    inputs: nativeInput(s, ctx),
    compression: { kind: "onebit", resetEvery: s.resetEvery ?? 0, pieceValues: s.pieceValues ?? 0, acrossHosts: new Set(ctx.hostOf).size > 1 },
    ...nativeReduction("mean"),
    inPlace: false,
  }),
};
