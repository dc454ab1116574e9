// Which address the tcp backend listens on, what it tells the other ranks, and which of a peer's addresses
// this rank dials. `tcp.iface` / --iface picks the interface like NCCL_SOCKET_IFNAME: a comma-separated
// list of interface-name prefixes ("eth,ib"), "=eth0" for an exact name, "^docker" to exclude; or an IP
// address. Without it the endpoint listens where the job's ranks will dial it (bindAddress): loopback when
// they all share this host, else the one address of this host that the other hosts share a subnet with,
// so that no stranger elsewhere on the network can reach it; on every interface (publishing all of them)
// only where different hosts would dial different addresses.
import net from "node:net";
import os from "node:os";
import { BackendError } from "./errors.js";

export interface Candidate {
  address: string;
  /** Prefix length of the address's subnet. */
  prefix: number;
}

export interface ListenPlan {
  /** What the endpoint binds: one address, or the wildcard "::" (every interface, IPv4 included; see bindAddress). */
  bind: string;
  /** What the other ranks may dial, best first (loopback and link-local addresses never). */
  addresses: Candidate[];
}

/** What each rank publishes when the ranks meet. */
export interface Published {
  port: number;
  /** The address the endpoint is bound to ("::" or "0.0.0.0" when it listens on all). */
  bound: string;
  addresses: Candidate[];
}

type Interfaces = NodeJS.Dict<os.NetworkInterfaceInfo[]>;

const WILDCARDS = new Set(["::", "0.0.0.0"]);

function usable(info: os.NetworkInterfaceInfo): boolean {
  // Link-local IPv6 needs the dialler's own scope id, which differs per host: never published.
  return !(info.family === "IPv6" && info.address.toLowerCase().startsWith("fe80:"));
}

function candidates(infos: os.NetworkInterfaceInfo[]): Candidate[] {
  const list = infos.filter(usable).map((i) => ({ address: i.address, prefix: Number(i.cidr?.split("/")[1] ?? (i.family === "IPv4" ? 32 : 128)), v4: i.family === "IPv4" }));
  // IPv4 first, then IPv6; otherwise in the system's order.
  return [...list.filter((c) => c.v4), ...list.filter((c) => !c.v4)].map(({ address, prefix }) => ({ address, prefix }));
}

/** Whether interface `name` is one that a --iface list of name prefixes ("eth,ib", "=eth0", "^docker") names. */
export function interfaceMatches(name: string, spec: string): boolean {
  const patterns = spec.split(",").map((p) => p.trim()).filter(Boolean);
  const excluded = patterns.filter((p) => p.startsWith("^")).map((p) => p.slice(1));
  const included = patterns.filter((p) => !p.startsWith("^"));
  const hit = (p: string) => (p.startsWith("=") ? name === p.slice(1) : name.startsWith(p));
  if (excluded.some(hit)) return false;
  return included.length === 0 || included.some(hit);
}

function listInterfaces(interfaces: Interfaces): string {
  return Object.entries(interfaces).map(([name, infos]) => `${name} ${(infos ?? []).map((i) => i.address).join(" ")}`).join(", ");
}

export function listenPlan(iface: string | undefined, interfaces: Interfaces = os.networkInterfaces()): ListenPlan {
  const all = Object.entries(interfaces);
  if (iface === undefined) {
    return { bind: "::", addresses: candidates(all.flatMap(([, infos]) => (infos ?? []).filter((i) => !i.internal))) };
  }
  if (net.isIP(iface)) {
    const known = all.flatMap(([, infos]) => infos ?? []).find((i) => i.address === iface);
    return { bind: iface, addresses: known ? candidates([known]) : [{ address: iface, prefix: net.isIPv4(iface) ? 32 : 128 }] };
  }
  const found = candidates(all.filter(([name]) => interfaceMatches(name, iface)).flatMap(([, infos]) => infos ?? []));
  if (found.length === 0) {
    throw new BackendError(`tcp.iface "${iface}": no interface matches it with a usable address (here: ${listInterfaces(interfaces)})`);
  }
  // One address, like NCCL: traffic leaves on the interface the user named.
  return { bind: found[0]!.address, addresses: [found[0]!] };
}

/**
 * An address as 4 or 16 bytes (any %scope dropped). An IPv6 address may end in a dotted quad; an
 * IPv4-mapped one (::ffff:a.b.c.d, what a dual-stack socket reports for an IPv4 peer) is that IPv4 address.
 */
function bytesOf(address: string): number[] {
  const a = address.split("%")[0]!;
  if (net.isIPv4(a)) return a.split(".").map(Number);
  const quad = /:(\d+\.\d+\.\d+\.\d+)$/.exec(a);
  const tail4 = quad ? quad[1]!.split(".").map(Number) : [];
  const hex = quad ? a.slice(0, quad.index + 1) + "0:0" : a;
  const [head, tail] = hex.includes("::") ? hex.split("::") : [hex, undefined];
  const groups = (s: string | undefined) => (s ? s.split(":") : []);
  let words = groups(head);
  if (tail !== undefined) {
    const back = groups(tail);
    words = [...words, ...Array<string>(8 - words.length - back.length).fill("0"), ...back];
  }
  const bytes = words.flatMap((w) => {
    const v = parseInt(w, 16);
    return [v >> 8, v & 0xff];
  });
  if (quad) bytes.splice(12, 4, ...tail4);
  const mapped = bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff;
  return mapped ? bytes.slice(12) : bytes;
}

/** The first of `addresses` inside a subnet of `mine`, else the first: what a host with addresses `mine` dials. */
function reachable(addresses: readonly Candidate[], mine: readonly Candidate[]): Candidate | undefined {
  return addresses.find((p) => mine.some((m) => sameSubnet(p.address, m))) ?? addresses[0];
}

/**
 * What the endpoint binds: the address `plan` names, if one; loopback where there is no other host; else the
 * address every other host (`others`, each one's addresses) would dial (peerAddress), or the wildcard where
 * they would dial different ones.
 */
export function bindAddress(plan: ListenPlan, others: readonly (readonly Candidate[])[]): string {
  if (!WILDCARDS.has(plan.bind)) return plan.bind;
  if (others.length === 0) return "127.0.0.1";
  const dialled = new Set(others.map((theirs) => reachable(plan.addresses, theirs)?.address));
  const [only] = dialled;
  return dialled.size === 1 && only !== undefined ? only : plan.bind;
}

function sameSubnet(a: string, b: Candidate): boolean {
  const x = bytesOf(a), y = bytesOf(b.address);
  if (x.length !== y.length) return false;
  // A mapped address's prefix counts the 96 bits of ::ffff: before the IPv4 address.
  const prefix = y.length === 4 && net.isIPv6(b.address.split("%")[0]!) ? b.prefix - 96 : b.prefix;
  for (let bit = 0; bit < prefix; bit++) {
    const mask = 0x80 >> bit % 8;
    if ((x[bit >> 3]! & mask) !== (y[bit >> 3]! & mask)) return false;
  }
  return true;
}

/**
 * The address to dial `peer` (rank `rank`) at. A peer on this host listening on all interfaces is reached
 * over loopback; one on another host at its first address inside a subnet of `mine`, else its first.
 */
export function peerAddress(peer: Published, rank: number, sameHost: boolean, mine: readonly Candidate[]): string {
  if (!WILDCARDS.has(peer.bound)) return peer.bound;
  if (sameHost) return "127.0.0.1";
  const chosen = reachable(peer.addresses, mine);
  if (!chosen) {
    throw new BackendError(`tcp: rank ${rank} runs on another host that has no address but loopback; set tcp.iface (--iface) there`);
  }
  return chosen.address;
}
