// The job's hosts and the links between its ranks, from the identities the ranks exchanged when they met.
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
  const hosts: Topology["hosts"] = [];
  const hostOf = ids.map((id, rank) => {
    let h = index.get(id.key);
    if (h === undefined) {
      h = hosts.length;
      index.set(id.key, h);
      const same = hosts.filter((x) => x.name === id.name || x.name.startsWith(`${id.name}#`)).length;
      hosts.push({ name: same ? `${id.name}#${same + 1}` : id.name, ranks: [] });
    }
    hosts[h]!.ranks.push(rank);
    return h;
  });
  return { hosts, hostOf };
}

const pairs = (n: number) => (n * (n - 1)) / 2;

/** Pairs on one host use shm when `shmWithinHosts`, every other pair tcp. */
export function linkCounts(t: Topology, shmWithinHosts: boolean): LinkCounts {
  const all = pairs(t.hostOf.length);
  const shm = shmWithinHosts ? t.hosts.reduce((n, h) => n + pairs(h.ranks.length), 0) : 0;
  return { shm, tcp: all - shm };
}

/** "vm (ranks 0-3)" or "a (ranks 0,1), b (ranks 2,3)". */
export function describeHosts(hosts: Topology["hosts"]): string {
  const ranks = (r: number[]) => {
    const contiguous = r.every((v, i) => i === 0 || v === r[i - 1]! + 1);
    return contiguous && r.length > 2 ? `${r[0]}-${r[r.length - 1]}` : r.join(",");
  };
  return hosts.map((h) => `${h.name} (rank${h.ranks.length > 1 ? "s" : ""} ${ranks(h.ranks)})`).join(", ");
}
