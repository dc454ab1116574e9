import type { NativeCommunicator, NativeOpResult } from "../comm/native.js";
import { ELEMENT_BYTES } from "../config/job.js";
import type { Plan } from "../plan.js";
import type { ResultRow } from "../results.js";
import { algbw, busbw } from "./bandwidth.js";
import { estimateErrors } from "./estimate.js";
import { linkClasses } from "./links.js";
import { gatherMismatches } from "./mismatches.js";
import { overlapPercent } from "./overlap.js";
import { perRankAverages, perRankSamples, stragglerUs } from "./ranks.js";
import { mean, timeStats } from "./stats.js";

const last = <T>(a: readonly T[]): T | null => (a.length ? a[a.length - 1]! : null);

/** Per-op arrays of `iterations` values (or none) laid out op-major; missing ones stay zero. */
function concat(perOp: Float64Array[], iterations: number): Float64Array {
  const out = new Float64Array(perOp.length * iterations);
  perOp.forEach((a, i) => out.set(a.subarray(0, iterations), i * iterations));
  return out;
}

/**
 * Combines every rank's measurements into report rows: an iteration's time is the slowest rank's
 * (nccl-tests, OSU), and #wrong is summed over ranks. Collective: every rank must call it.
 */
export async function aggregate(
  comm: NativeCommunicator, plan: Plan, results: NativeOpResult[], check: boolean, { samples = false, links: byLink = false } = {},
): Promise<ResultRow[]> {
  const iterations = plan.program.iterations;
  const times = new Float64Array(results.length * iterations);
  results.forEach((r, i) => times.set(r.timeUs, i * iterations));
  // Bounded by the job's deadline like its ops: a rank that never gets here must not hang the others.
  const timeoutSec = plan.program.timeoutSec;
  const slowest = await comm.allreduceF64(times, "max", timeoutSec, "(report: times)");
  const wrong = await comm.allreduceF64(Float64Array.from(results, (r) => r.wrong), "sum", timeoutSec, "(report: #wrong)");
  const located = wrong.some((w) => w > 0) ? await gatherMismatches(comm, plan, results, timeoutSec) : undefined;
  const errors = await estimateErrors(comm, plan, results);
  const perRank = await perRankAverages(comm, results, timeoutSec);
  // Asked for alike on every rank: a rank alone on its host has no shm and no counters of its own.
  const links = byLink ? await linkClasses(comm, results, iterations, timeoutSec) : undefined;
  const perRankTimes = samples ? await perRankSamples(comm, results, iterations, timeoutSec) : undefined;
  // Nonblocking stages: per iteration the slowest rank's post-to-completion and concurrent compute time.
  const overall = await comm.allreduceF64(concat(results.map((r) => r.overallUs), iterations), "max", timeoutSec, "(report: overall)");
  const starts = await comm.allreduceF64(concat(results.map((r) => r.startUs), iterations), "max", timeoutSec, "(report: starts)");
  const concurrent = await comm.allreduceF64(concat(results.map((r) => r.concurrentUs), iterations), "max", timeoutSec, "(report: concurrent)");
  return plan.stages.map(({ stage, kind, count, dtype, params, fallback, stream, groupSize, group, traceUs }, i): ResultRow => {
    const time = timeStats(slowest.subarray(i * iterations, (i + 1) * iterations));
    const size = dtype ? count * ELEMENT_BYTES[dtype] : 0;
    // A group of one rank moves nothing, whatever the op's factor for larger groups (broadcast's is 1).
    const factor = groupSize > 1 ? kind.busFactor(groupSize, stage) : 0;
    // Exact collectives: the per-rank traffic of a bandwidth-optimal algorithm (what busbw assumes).
    const exactWire = Math.round(size * factor);
    // Estimating stages report what this rank really sent per step (the same on every rank).
    const wire = results[i]!.wireBytes?.[0] ?? exactWire;
    const error = errors[i];
    const ranks = perRank[i]!;
    const slice = (a: Float64Array) => a.subarray(i * iterations, (i + 1) * iterations);
    return {
      stage: stage.id,
      op: stage.op,
      size,
      count,
      type: dtype,
      redop: "reduce" in stage ? stage.reduce : (kind.redop ?? null),
      root: "root" in stage ? stage.root : null,
      algorithm: results[i]!.algorithm,
      time,
      ...(traceUs !== undefined && { trace_us: traceUs }),
      algbw: algbw(size, time.avg_us),
      busbw: busbw(size, time.avg_us, factor),
      wrong: check && dtype && !error ? wrong[i]! : null,
      ...(located?.[i]?.length && { mismatches: located[i] }),
      ...(links?.[i] && { links: links[i] }),
      wire_bytes: wire,
      rel_error: error ? last(error.relErrorByStep) : null,
      ...(params && { params }),
      ...(stream !== "main" && { stream }),
      ...(plan.stages.some((s) => s.lane !== 0) && { start_us: mean(slice(starts)) }),
      ...(group && { group: group.name, groups: group.count }),
      per_rank_avg_us: ranks,
      slowest_rank: ranks.indexOf(Math.max(...ranks)),
      straggler_us: stragglerUs(ranks),
      ...(perRankTimes && { samples: { slowest_us: Array.from(slice(slowest)), per_rank_us: perRankTimes[i]! } }),
      ...(results[i]!.overallUs.length > 0 && {
        overlap: overlapPercent(mean(slice(overall)), mean(slice(concurrent)), time.avg_us),
      }),
      ...(error && {
        compression_ratio: wire > 0 ? exactWire / wire : null,
        rel_error_by_step: error.relErrorByStep,
        running_mean_rel_error: last(error.runningMeanRelErrorByStep),
        running_mean_rel_error_by_step: error.runningMeanRelErrorByStep,
      }),
      ...(fallback !== undefined && { fallback }),
    };
  });
}
