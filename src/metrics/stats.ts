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

/** The sample standard deviation (n - 1; 0 for fewer than two values). */
function stddev(values: readonly number[], avg: number): number {
  if (values.length < 2) return 0;
  return Math.sqrt(values.reduce((s, v) => s + (v - avg) ** 2, 0) / (values.length - 1));
}

export function timeStats(samples: ArrayLike<number>): TimeStats {
  const sorted = Array.from(samples).sort((a, b) => a - b);
  const avg = mean(sorted);
  return {
    avg_us: avg,
    p50_us: percentile(sorted, 50),
    p95_us: percentile(sorted, 95),
    p99_us: percentile(sorted, 99),
    stddev_us: stddev(sorted, avg),
    min_us: sorted[0] ?? 0,
    max_us: sorted[sorted.length - 1] ?? 0,
  };
}
