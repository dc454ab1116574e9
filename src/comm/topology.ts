// The job's hosts and the links between its ranks, from the identities the ranks exchanged when they met.
import type { Place } from "../env/place.js";
import type { HostIdentity } from "./host.js";

export interface Topology {
  /** In order of their lowest rank; names are made unique ("node1", "node1#2") when hosts share one. */
  hosts: { name: string; ranks: number[] }[];
  /** hostOf[rank]: the index of its host. */
  hostOf: number[];
}

/** How many pairs of ranks talk over each kind of link. */
export interface LinkCounts {
  shm: number;
  tcp: number;
}

export function topologyOf(ids: readonly HostIdentity[]): Topology {
  const index = new Map<string, number>();
  // Hosts met so far by name: a world of one rank per host would otherwise search them all for each.
  const named = new Map<string, number>();
  const hosts: Topology["hosts"] = [];
  const hostOf = ids.map((id, rank) => {
    let h = index.get(id.key);
    if (h === undefined) {
      h = hosts.length;
      index.set(id.key, h);
      const same = named.get(id.name) ?? 0;
      named.set(id.name, same + 1);
      hosts.push({ name: same ? `${id.name}#${same + 1}` : id.name, ranks: [] });
    }
    hosts[h]!.ranks.push(rank);
    return h;
  });
  return { hosts, hostOf };
}

/** Where a rank sits among the hosts: its host's index, its index among that host's ranks, and their number. */
export interface HostPlace {
  node: number;
  localRank: number;
  localSize: number;
}

export function hostPlace(t: Topology, rank: number): HostPlace {
  const node = t.hostOf[rank]!;
  const ranks = t.hosts[node]!.ranks;
  return { node, localRank: ranks.indexOf(rank), localSize: ranks.length };
}

/** Every rank's HostPlace, by rank: hostPlace for each would search its host's ranks, W² for one host. */
export function hostPlaces(t: Topology): HostPlace[] {
  const places = new Array<HostPlace>(t.hostOf.length);
  t.hosts.forEach((h, node) => h.ranks.forEach((rank, localRank) => (places[rank] = { node, localRank, localSize: h.ranks.length })));
  return places;
}

/** What the launcher's variables (or MPI) said of a rank's place, checked against the hosts. */
export type LauncherView = Pick<Place, "localRank" | "localSize" | "nodeRank">;

/** Who said what a LauncherView holds, as a contradiction names it. */
export interface Witness {
  contradicts: string;
  says: string;
}
export const LAUNCHER: Witness = { contradicts: "the launcher's variables contradict", says: "the launcher says" };
export const MPI_SHARED: Witness = { contradicts: "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) contradicts", says: "MPI says" };

/** Where a launcher view's node index groups ranks otherwise than the hosts do. */
function nodeDisagrees(t: Topology, said: readonly LauncherView[]): (rank: number) => boolean {
  const hostOfNode = new Map<number, number>();
  const nodeOfHost = new Map<number, number>();
  said.forEach((v, rank) => {
    if (v.nodeRank === undefined) return;
    if (!hostOfNode.has(v.nodeRank)) hostOfNode.set(v.nodeRank, t.hostOf[rank]!);
    if (!nodeOfHost.has(t.hostOf[rank]!)) nodeOfHost.set(t.hostOf[rank]!, v.nodeRank);
  });
  return (rank) => {
    const node = said[rank]!.nodeRank;
    return node !== undefined && (hostOfNode.get(node) !== t.hostOf[rank] || nodeOfHost.get(t.hostOf[rank]!) !== node);
  };
}

/**
 * One line naming the ranks (the first four) whose local rank, local size or node index as `who` gives them
 * contradicts the hosts they met on, or undefined when all agree. The hosts win; the line is a warning.
 */
export function contradictions(t: Topology, said: readonly LauncherView[], who: Witness = LAUNCHER): string | undefined {
  const nodeWrong = nodeDisagrees(t, said);
  const places = hostPlaces(t);
  const bad = said.flatMap((v, rank) => {
    const real = places[rank]!;
    const localWrong = v.localRank !== real.localRank || v.localSize !== real.localSize;
    if (!localWrong && !nodeWrong(rank)) return [];
    const node = v.nodeRank === undefined ? "" : ` on node ${v.nodeRank}`;
    return [`rank ${rank} is local rank ${real.localRank} of ${real.localSize} on host ${t.hosts[real.node]!.name} (node ${real.node}), ` +
      `${who.says} local rank ${v.localRank} of ${v.localSize}${node}`];
  });
  if (bad.length === 0) return undefined;
  const more = bad.length > 4 ? `; and ${bad.length - 4} more` : "";
  return `topology: ${who.contradicts} the hosts the ranks met on, which are used: ${bad.slice(0, 4).join("; ")}${more}`;
}

const pairs = (n: number) => (n * (n - 1)) / 2;

/** Pairs on one host use shm when `shmWithinHosts`, every other pair tcp. */
export function linkCounts(t: Topology, shmWithinHosts: boolean): LinkCounts {
  const all = pairs(t.hostOf.length);
  const shm = shmWithinHosts ? t.hosts.reduce((n, h) => n + pairs(h.ranks.length), 0) : 0;
  return { shm, tcp: all - shm };
}

/** "vm (ranks 0-3)" or "a (ranks 0,2), b (ranks 1,3)". */
export function describeHosts(hosts: Topology["hosts"]): string {
  return hosts.map((h) => `${h.name} (${describeRanks(h.ranks)})`).join(", ");
}

/** "rank 3", "ranks 1,3", "ranks 0-15" (ascending ranks). */
export function describeRanks(r: readonly number[]): string {
  const contiguous = r.every((v, i) => i === 0 || v === r[i - 1]! + 1);
  return `rank${r.length > 1 ? "s" : ""} ${contiguous && r.length > 2 ? `${r[0]}-${r[r.length - 1]}` : r.join(",")}`;
}
