// What doctor concludes from the numbers: pure functions over host indices and measured links.
//
// The reference must be one that faults cannot move. The median link could not be: a slow host touches n-1
// of the n(n-1)/2 links, two thirds of them at 3 hosts, so the median was a slow link and nothing was below
// it. A host's best link is slow only when the host is (or when every host it met is), so:
//   - a host is slow when its best link is below `threshold` of the median of the other hosts' best links;
//   - a link is slow when it is below `threshold` of the lesser of its two hosts' best links (a slow host's
//     links are its own fault, not the links');
//   - every link is slow when every host's best link is below `threshold` of the absolute reference:
//     --expect GBPS, or the NICs' own speed; without one doctor says it has none.
// Worked through (F fast, S below F/2; X, Y slow hosts, A-B a slow link; median of others' best links):
//   hosts | one slow host X          | one slow link A-B       | two slow hosts X, Y          | every link slow
//   2     | one link, bests S,S: only the reference can tell (named "every link")              | reference only
//   3     | X: S vs med(F,F); others | bests F,F,F; A-B: S vs  | bests S,S,S: as every link   | reference only
//         | F vs med(F,S)=(F+S)/2    | min(F,F) -> the link    | (each link touches X or Y)   |
//   4     | X: S vs F                | the link, no host       | X, Y: S vs med(F,F,S); the   | reference only
//         |                          |                         | others F vs med(F,S,S)=S     |
//   5     | X: S vs F                | the link, no host       | X, Y: S vs med(F,F,F,S)=F    | reference only
//   40    | as 5 (bisection: X meets | named when measured     | as 5; a host whose measured  | reference only
//         | 2 hosts a level)         | (all pairs at <= 16)    | partners are X and Y only is |
//         |                          |                         | cleared by a confirming link |
// test/doctor.test.js checks each cell.
import type { DoctorOutlier } from "../results.js";

/** Two hosts that exchange in one round (a < b), or one host with itself: its intra-host pair of ranks. */
export type Pair = readonly [number, number];

export interface LinkMeasure {
  /** One direction's bandwidth while both directions ran at once, GB/s (1e9 bytes). */
  gbps: number;
  /** A small message's exchange time, microseconds. */
  us: number;
}

/** What the survey measured, by pairKey. */
export type Measured = Map<string, LinkMeasure>;

export const pairKey = ([a, b]: Pair): string => `${a}-${b}`;

export const median = (values: readonly number[]): number => {
  const s = [...values].sort((x, y) => x - y);
  return s.length === 0 ? 0 : s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** The absolute reference for every link, each way, GB/s, and where it came from. */
export interface AbsoluteReference {
  gbps: number;
  source: "expect" | "nic";
}

/** The measured links between hosts (not a host with itself). */
function linksOf(measured: Measured): { pair: [number, number]; gbps: number }[] {
  return [...measured.entries()]
    .map(([k, m]) => ({ pair: k.split("-").map(Number) as [number, number], gbps: m.gbps }))
    .filter((e) => e.pair[0] !== e.pair[1]);
}

/** Each host's best measured link, GB/s (null for a host none was measured to). */
export function bestLinks(hostCount: number, measured: Measured): (number | null)[] {
  const best: (number | null)[] = Array(hostCount).fill(null);
  for (const { pair, gbps } of linksOf(measured)) for (const h of pair) best[h] = Math.max(best[h] ?? 0, gbps);
  return best;
}

/** For each value, the median of the others' (null where it or all the others are null). */
export function othersMedian(values: readonly (number | null)[]): (number | null)[] {
  return values.map((v, i) => {
    const others = values.filter((o, j): o is number => j !== i && o !== null);
    return v === null || others.length === 0 ? null : median(others);
  });
}

/** The hosts whose value is below `threshold` of the median of the other hosts' values. */
export function belowOthers(values: readonly (number | null)[], threshold: number): number[] {
  const ref = othersMedian(values);
  return values.flatMap((v, i) => (v !== null && ref[i] !== null && v < threshold * ref[i]! ? [i] : []));
}

const gb = (x: number) => `${x.toFixed(3)} GB/s`;
const SOURCE = { expect: "--expect", nic: "the NICs' speed" } as const;

type Against = Extract<DoctorOutlier, { kind: "host" }>["against"];

function hostOutlier(host: string, gbps: number, ref: number, against: Against): DoctorOutlier {
  const [what, of] = against === "within" ? ["within the host", "the other hosts' (median "]
    : against === "links" ? ["best link", "the other hosts' best links (median "] : ["best link", `${SOURCE[against]} (`];
  return { kind: "host", host, gbps, reference_gbps: ref, against, why: `${what} ${gb(gbps)}, ${(gbps / ref).toFixed(2)} of ${of}${gb(ref)})` };
}

function everyLink(best: readonly (number | null)[], abs: AbsoluteReference): DoctorOutlier {
  const top = Math.max(...best.filter((b): b is number => b !== null));
  return { kind: "network", gbps: top, reference_gbps: abs.gbps, against: abs.source,
    why: `every link is slow: the best ${gb(top)}, ${(top / abs.gbps).toFixed(2)} of ${SOURCE[abs.source]} (${gb(abs.gbps)})` };
}

/**
 * Hosts slow against the others (within the host, then between hosts), then against the absolute reference,
 * one outlier each; when every host is below the reference, one "every link" instead of each host.
 */
function slowHosts(names: readonly string[], measured: Measured, best: (number | null)[], threshold: number, abs?: AbsoluteReference): DoctorOutlier[] {
  const intra = names.map((_, h) => measured.get(pairKey([h, h]))?.gbps ?? null);
  const out = new Map<number, DoctorOutlier>();
  const add = (h: number, gbps: number, ref: number, against: Against) => out.has(h) || out.set(h, hostOutlier(names[h]!, gbps, ref, against));
  const intraRef = othersMedian(intra), bestRef = othersMedian(best);
  for (const h of belowOthers(intra, threshold)) add(h, intra[h]!, intraRef[h]!, "within");
  for (const h of belowOthers(best, threshold)) add(h, best[h]!, bestRef[h]!, "links");
  if (!abs) return [...out.values()];
  const measuredHosts = best.flatMap((b, h) => (b === null ? [] : [h]));
  const below = measuredHosts.filter((h) => best[h]! < threshold * abs.gbps);
  if (below.length > 0 && below.length === measuredHosts.length) return [...out.values(), everyLink(best, abs)];
  for (const h of below) add(h, best[h]!, abs.gbps, abs.source);
  return [...out.values()];
}

/**
 * The outliers among `names`' hosts and links (see the top of this file): links first, then hosts, then
 * "every link" when the absolute reference `abs` says so.
 */
export function judge(names: readonly string[], measured: Measured, threshold: number, abs?: AbsoluteReference): DoctorOutlier[] {
  const best = bestLinks(names.length, measured);
  const links = linksOf(measured);
  const linkMedian = median(links.map((e) => e.gbps));
  const slowLinks: DoctorOutlier[] = links.flatMap(({ pair: [a, b], gbps }) => {
    const ref = Math.min(best[a]!, best[b]!);
    return gbps < threshold * ref ? [{ kind: "link" as const, hosts: [names[a]!, names[b]!] as [string, string], gbps, median_gbps: linkMedian, reference_gbps: ref }] : [];
  });
  return [...slowLinks, ...slowHosts(names, measured, best, threshold, abs)];
}
