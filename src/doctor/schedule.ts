// Which hosts doctor pairs in each round. Pure functions over host indices: the ranks run the same schedule
// because every rank sees every round's numbers.
import { belowOthers, bestLinks, pairKey, type LinkMeasure, type Measured, type Pair } from "./judge.js";

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

async function measureRounds(rounds: readonly Pair[][], measure: MeasureRound, into: Measured): Promise<void> {
  for (const round of rounds.filter((r) => r.length > 0)) {
    const got = await measure(round);
    round.forEach((p, i) => into.set(pairKey(p), got[i]!));
  }
}

/**
 * Above ALL_PAIRS_UP_TO hosts: each host of one half meets two hosts of the other (two rounds). When a host's
 * better link is below `threshold` of the other hosts' (judge.ts), the half holding the slowest such host is
 * surveyed the same way; a half small enough gets every pair.
 */
async function bisect(hosts: readonly number[], measure: MeasureRound, threshold: number, into: Measured): Promise<void> {
  if (hosts.length <= ALL_PAIRS_UP_TO) return measureRounds(roundRobin(hosts), measure, into);
  const half = Math.floor(hosts.length / 2);
  const left = hosts.slice(0, half), right = hosts.slice(half);
  const cross = (shift: number): Pair[] => left.map((a, i) => [a, right[(i + shift) % right.length]!] as const);
  const level: Measured = new Map();
  await measureRounds([cross(0), cross(1)], measure, level);
  level.forEach((m, k) => into.set(k, m));
  const best = bestLinks(Math.max(...hosts) + 1, level);
  const slow = belowOthers(best, threshold);
  if (slow.length === 0) return;
  const slowest = slow.reduce((x, y) => (best[y]! < best[x]! ? y : x));
  await bisect(left.includes(slowest) ? left : right, measure, threshold, into);
}

/**
 * One round that gives each suspect host (slow against the others) a link to a host that is not, where it
 * has none yet: a healthy host whose partners in the bisection were all slow ones is then cleared.
 */
async function confirm(hostCount: number, measure: MeasureRound, threshold: number, into: Measured): Promise<void> {
  const best = bestLinks(hostCount, into);
  const suspects = belowOthers(best, threshold);
  const clear = best.flatMap((b, h) => (b !== null && !suspects.includes(h) ? [h] : [])).sort((x, y) => best[y]! - best[x]!);
  const measured = (a: number, b: number) => into.has(pairKey(a < b ? [a, b] : [b, a]));
  const round: Pair[] = [];
  for (const s of suspects.filter((x) => !clear.some((c) => measured(x, c)))) {
    const c = clear.find((h) => !round.some((p) => p.includes(h)));
    if (c === undefined) break;
    round.push(s < c ? [s, c] : [c, s]);
  }
  await measureRounds([round], measure, into);
}

/**
 * Measures the links between `hostCount` hosts, and within each host listed in `intra` (one round, all at
 * once): every pair up to ALL_PAIRS_UP_TO hosts, about hostCount rounds; by bisection above, and at most one
 * round more to confirm its suspects.
 */
export async function survey(hostCount: number, intra: readonly number[], measure: MeasureRound, threshold: number): Promise<Measured> {
  const measured: Measured = new Map();
  await measureRounds([intra.map((h) => [h, h] as const)], measure, measured);
  await bisect(Array.from({ length: hostCount }, (_, i) => i), measure, threshold, measured);
  await confirm(hostCount, measure, threshold, measured);
  return measured;
}
