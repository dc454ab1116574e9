import type { TimeStats } from "../results.js";

export function mean(values: ArrayLike<number>): number {
  let sum = 0;
  for (let i = 0; i < values.length; i++) sum += values[i]!;
  return values.length ? sum / values.length : 0;
}

/** Nearest-rank percentile of sorted values (p in [0, 100]). */
function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

export function timeStats(samples: ArrayLike<number>): TimeStats {
  const sorted = Array.from(samples).sort((a, b) => a - b);
  const sum = sorted.reduce((s, v) => s + v, 0);
  return {
    avg_us: sorted.length ? sum / sorted.length : 0,
    p50_us: percentile(sorted, 50),
    p95_us: percentile(sorted, 95),
    min_us: sorted[0] ?? 0,
    max_us: sorted[sorted.length - 1] ?? 0,
  };
}
