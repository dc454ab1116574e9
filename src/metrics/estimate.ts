import type { NativeCommunicator, NativeOpResult } from "../comm/native.js";
import type { Plan } from "../plan.js";

/** How far an estimating stage's output is from the exact result, per step (warmup steps included). */
export interface EstimateErrors {
  /** ‖output − exact‖ / ‖exact‖ after each step. */
  relErrorByStep: (number | null)[];
  /** The same for the mean of the outputs of steps 1..k, which error feedback drives towards the exact mean. */
  runningMeanRelErrorByStep: (number | null)[];
}

/** null where the exact result is all zeros and a relative error means nothing. */
function relative(errorSq: number, exactSq: number): number | null {
  return exactSq > 0 ? Math.sqrt(errorSq / exactSq) : null;
}

function errorSums(stage: string, r: NativeOpResult) {
  if (!r.exactSq || !r.errorSq || !r.runningErrorSq) throw new Error(`stage ${stage}: native code reported no error sums`);
  return { exactSq: r.exactSq, errorSq: r.errorSq, runningErrorSq: r.runningErrorSq };
}

/**
 * Adds up every rank's partial sums of squares (each rank measures its own block of the elements) in one
 * collective and turns them into relative errors, for the stages that estimate at this point (not those
 * that fell back to the exact collective); null for the others. Collective: every rank must call it.
 */
export async function estimateErrors(comm: NativeCommunicator, plan: Plan, results: NativeOpResult[]): Promise<(EstimateErrors | null)[]> {
  const out: (EstimateErrors | null)[] = plan.stages.map(() => null);
  // Every rank plans the same stages, so every rank skips the collective together.
  const estimating = plan.stages.flatMap((s, i) => (s.estimates ? [i] : []));
  if (estimating.length === 0) return out;
  const parts = estimating.map((i) => errorSums(plan.stages[i]!.stage.id, results[i]!));
  const flat = parts.flatMap((p) => [...p.exactSq, ...p.errorSq, ...p.runningErrorSq]);
  const sums = await comm.allreduceF64(Float64Array.from(flat), "sum", plan.program.timeoutSec, "(report: errors)");
  let at = 0;
  estimating.forEach((i, k) => {
    const steps = parts[k]!.errorSq.length;
    const exactSq = sums[at]!;
    out[i] = {
      relErrorByStep: Array.from(sums.subarray(at + 1, at + 1 + steps), (e) => relative(e, exactSq)),
      runningMeanRelErrorByStep: Array.from(sums.subarray(at + 1 + steps, at + 1 + 2 * steps), (e) => relative(e, exactSq)),
    };
    at += 1 + 2 * steps;
  });
  return out;
}
