import type { NativeCommunicator, NativeOpResult } from "../comm/native.js";
import { mean } from "./stats.js";

/**
 * Every rank's average time per op, on every rank: rank r fills row r of an ops × W matrix and a sum
 * over ranks assembles it. Collective.
 */
export async function perRankAverages(comm: NativeCommunicator, results: NativeOpResult[], timeoutSec: number): Promise<number[][]> {
  const W = comm.size;
  const mine = new Float64Array(results.length * W);
  results.forEach((r, i) => (mine[i * W + comm.rank] = mean(r.timeUs)));
  const all = await comm.allreduceF64(mine, "sum", timeoutSec, "(report: per rank)");
  return results.map((_, i) => Array.from(all.subarray(i * W, (i + 1) * W)));
}

/** Every rank's time of every timed iteration, per op: [op][rank][iteration], on every rank. Collective. */
export async function perRankSamples(comm: NativeCommunicator, results: NativeOpResult[], iterations: number, timeoutSec: number): Promise<number[][][]> {
  const W = comm.size, perOp = W * iterations;
  const mine = new Float64Array(results.length * perOp);
  results.forEach((r, i) => mine.set(r.timeUs.subarray(0, iterations), i * perOp + comm.rank * iterations));
  const all = await comm.allreduceF64(mine, "sum", timeoutSec, "(report: samples)");
  return results.map((_, i) =>
    Array.from({ length: W }, (__, r) => Array.from(all.subarray(i * perOp + r * iterations, i * perOp + (r + 1) * iterations))),
  );
}

/** DESIGN.md's straggler effect: Σ over ranks of (rank latency − fastest rank's latency). */
export function stragglerUs(perRank: number[]): number {
  const fastest = Math.min(...perRank);
  return perRank.reduce((s, v) => s + (v - fastest), 0);
}
