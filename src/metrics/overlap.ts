export interface Overlap {
  /** Post to completion, slowest rank. */
  overall_us: number;
  /** Other stages' time while the op was in flight. */
  compute_us: number;
  /** The op's own communication time (measured while overlapping). */
  comm_us: number;
  /** OSU's overlap: max(0, 100 − (overall − compute) / comm · 100). */
  overlap_pct: number;
}

export function overlapPercent(overallUs: number, computeUs: number, commUs: number): Overlap {
  const pct = commUs > 0 ? Math.min(100, Math.max(0, 100 - ((overallUs - computeUs) / commUs) * 100)) : 0;
  return { overall_us: overallUs, compute_us: computeUs, comm_us: commUs, overlap_pct: pct };
}
