// Which hosts doctor pairs in each round, and what it concludes from the numbers. Pure functions over host
// indices: the ranks run the same schedule because every rank sees every round's numbers.
import type { DoctorOutlier } from "../results.js";

/** Two hosts that exchange in one round (a < b), or one host with itself: its intra-host pair of ranks. */
export type Pair = readonly [number, number];

export interface LinkMeasure {
  /** One direction's bandwidth while both directions ran at once, GB/s (1e9 bytes). */
  gbps: number;
  /** A small message's exchange time, microseconds. */
  us: number;
}

/** Measures one round of disjoint pairs at once; the answers in the order of the pairs. */
export type MeasureRound = (pairs: readonly Pair[]) => Promise<LinkMeasure[]>;

/** Up to this many hosts every pair is measured; above it doctor bisects. */
export const ALL_PAIRS_UP_TO = 16;

/**
 * Every pair of `hosts` once, in rounds of disjoint pairs (the circle method): n - 1 rounds for even n,
 * n for odd n, against n(n-1)/2 one pair at a time.
 */
export function roundRobin(hosts: readonly number[]): Pair[][] {
  const m = hosts.length % 2 ? hosts.length + 1 : hosts.length; // an odd count sits one host out per round
  const rounds: Pair[][] = [];
  for (let k = 0; k < m - 1; k++) {
    // Slot 0 stays; the others turn one place per round.
    const slots = [0, ...Array.from({ length: m - 1 }, (_, i) => ((i + k) % (m - 1)) + 1)];
    const round: Pair[] = [];
    for (let i = 0; i < m / 2; i++) {
      const a = hosts[slots[i]!], b = hosts[slots[m - 1 - i]!];
      if (a !== undefined && b !== undefined) round.push(a < b ? [a, b] : [b, a]);
    }
    rounds.push(round);
  }
  return rounds;
}

export const median = (values: readonly number[]): number => {
  const s = [...values].sort((x, y) => x - y);
  return s.length === 0 ? 0 : s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

export const pairKey = ([a, b]: Pair): string => `${a}-${b}`;

/** What the survey measured, by pairKey. */
export type Measured = Map<string, LinkMeasure>;

async function measureRounds(rounds: readonly Pair[][], measure: MeasureRound, into: Measured): Promise<void> {
  for (const round of rounds.filter((r) => r.length > 0)) {
    const got = await measure(round);
    round.forEach((p, i) => into.set(pairKey(p), got[i]!));
  }
}

/**
 * Above ALL_PAIRS_UP_TO hosts: each host of one half meets two hosts of the other (two rounds); a host is
 * as fast as its better link. When some host's better link is below `threshold` of the median, the half
 * holding the slowest host is surveyed the same way; a half small enough gets every pair.
 */
async function bisect(hosts: readonly number[], measure: MeasureRound, threshold: number, into: Measured): Promise<void> {
  if (hosts.length <= ALL_PAIRS_UP_TO) return measureRounds(roundRobin(hosts), measure, into);
  const half = Math.floor(hosts.length / 2);
  const left = hosts.slice(0, half), right = hosts.slice(half);
  const cross = (shift: number): Pair[] => left.map((a, i) => [a, right[(i + shift) % right.length]!] as const);
  await measureRounds([cross(0), cross(1)], measure, into);
  const best = new Map<number, number>();
  for (const shift of [0, 1]) {
    for (const p of cross(shift)) {
      const g = into.get(pairKey(p))!.gbps;
      for (const h of p) best.set(h, Math.max(best.get(h) ?? 0, g));
    }
  }
  const mid = median([...best.values()]);
  const slowest = [...best.entries()].reduce((x, y) => (y[1] < x[1] ? y : x));
  if (slowest[1] >= threshold * mid) return;
  await bisect(left.includes(slowest[0]) ? left : right, measure, threshold, into);
}

/**
 * Measures the links between `hostCount` hosts, and within each host listed in `intra` (one round, all at
 * once): every pair up to ALL_PAIRS_UP_TO hosts, about hostCount rounds; by bisection above.
 */
export async function survey(hostCount: number, intra: readonly number[], measure: MeasureRound, threshold: number): Promise<Measured> {
  const measured: Measured = new Map();
  await measureRounds([intra.map((h) => [h, h] as const)], measure, measured);
  await bisect(Array.from({ length: hostCount }, (_, i) => i), measure, threshold, measured);
  return measured;
}

/**
 * Links below `threshold` of the median link; hosts whose intra-host bandwidth is below `threshold` of the
 * median host's, or more than half of whose measured links are outliers.
 */
export function findOutliers(names: readonly string[], measured: Measured, threshold: number): DoctorOutlier[] {
  const entries = [...measured.entries()].map(([k, m]) => ({ pair: k.split("-").map(Number) as [number, number], m }));
  const links = entries.filter((e) => e.pair[0] !== e.pair[1]), intra = entries.filter((e) => e.pair[0] === e.pair[1]);
  const linkMedian = median(links.map((e) => e.m.gbps)), intraMedian = median(intra.map((e) => e.m.gbps));
  const slowLinks = links.filter((e) => e.m.gbps < threshold * linkMedian);
  const out: DoctorOutlier[] = slowLinks.map((e) => ({
    kind: "link", hosts: [names[e.pair[0]]!, names[e.pair[1]]!], gbps: e.m.gbps, median_gbps: linkMedian,
  }));
  names.forEach((name, h) => {
    const own = intra.find((e) => e.pair[0] === h);
    const mine = links.filter((e) => e.pair.includes(h)), slow = slowLinks.filter((e) => e.pair.includes(h));
    if (own && own.m.gbps < threshold * intraMedian) {
      out.push({ kind: "host", host: name, why: `within the host ${own.m.gbps.toFixed(3)} GB/s, median host ${intraMedian.toFixed(3)} GB/s` });
    } else if (mine.length > 0 && slow.length * 2 > mine.length) {
      out.push({ kind: "host", host: name, why: `${slow.length} of its ${mine.length} links below ${threshold} of the median link` });
    }
  });
  return out;
}
