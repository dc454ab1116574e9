import type { Overlap } from "../results.js";

export function overlapPercent(overallUs: number, computeUs: number, commUs: number): Overlap {
  const pct = commUs > 0 ? Math.min(100, Math.max(0, 100 - ((overallUs - computeUs) / commUs) * 100)) : 0;
  return { overall_us: overallUs, compute_us: computeUs, comm_us: commUs, overlap_pct: pct };
}
