// Starts the tcp backend once the ranks have met: every rank opens an endpoint and the ranks exchange where
// they listen; each connection then opens on first use. With `shmWithinHosts` (backend auto on hosts that hold several ranks) the
// ranks of one host share a segment and only ranks on different hosts talk over tcp ("shm+tcp").
import type { Place } from "../env/place.js";
import type { Bootstrap } from "./bootstrap.js";
import { native, type NativeCommunicator, type NativeTcpEndpoint } from "./native.js";
import { segmentTag, type JobSecret } from "./secret.js";
import { segmentName } from "./shm-names.js";
import { allOrNone } from "./startup.js";
import { listenPlan, peerAddress, type ListenPlan, type Published } from "./tcp-address.js";
import type { Topology } from "./topology.js";

export interface TcpStartOptions {
  /** What a peer proves it knows when it connects: the job secret's key for the tcp transport (secret.ts), hex. */
  key: string;
  /** The job's secret, whose tag the host's shm segment carries ("shm+tcp"). */
  secret: JobSecret;
  iface?: string;
  shmWithinHosts: boolean;
  /** false: this rank's host stages its local messages (SPMD_SHM_SINGLE_COPY=0, start-shm.ts). */
  singleCopy: boolean;
  /** This rank shares its CPUs with other ranks of its machine (host.ts sharesCores): its shm waits must not spin. */
  sharesCores: boolean;
}

function openEndpoint(plan: ListenPlan, peers: number): NativeTcpEndpoint {
  const { TcpEndpoint } = native();
  try {
    return new TcpEndpoint({ address: plan.bind, peers });
  } catch (err) {
    // A host without IPv6 cannot bind "::"; IPv4's wildcard then serves the same purpose.
    if (plan.bind !== "::") throw err;
    return new TcpEndpoint({ address: "0.0.0.0", peers });
  }
}

export async function startTcp(boot: Bootstrap, place: Place, topo: Topology, o: TcpStartOptions): Promise<NativeCommunicator> {
  const { rank, size } = place;
  const plan = listenPlan(o.iface);
  const endpoint = openEndpoint(plan, 2 * size);
  const here = topo.hosts[topo.hostOf[rank]!]!.ranks;
  const local = o.shmWithinHosts && here.length > 1 ? here : undefined;
  const { Communicator } = native();
  const { key } = o;
  let comm: NativeCommunicator | undefined;
  const start = (name?: string) => {
    comm = new Communicator({ backend: "tcp", rank, size, key, endpoint, nodeOf: topo.hostOf, ...(name && { local: { name, tag: segmentTag(o.secret, name), singleCopy: o.singleCopy, sharesCores: o.sharesCores } }) });
    return name ?? "";
  };
  try {
    // The host's lowest rank creates the segment before it publishes the name, so the others can attach
    // as soon as the exchange returns; a rank that cannot create or attach fails them all at once.
    const creates = local?.[0] === rank;
    const mine = (): string => {
      const segment = creates ? start(segmentName()) : "";
      return JSON.stringify({ port: endpoint.port, bound: endpoint.address, addresses: plan.addresses, segment } satisfies Published & { segment: string });
    };
    const all = (await allOrNone(boot, "tcp/endpoint", mine)).map((s) => JSON.parse(s) as Published & { segment: string });
    await allOrNone(boot, "tcp/local", () => (creates ? "" : start(local && all[local[0]!]!.segment)));
    // Everyone is attached: the segment's name is no longer needed, and unlinking it now means no crash can
    // leak it.
    const ready = comm!;
    ready.release();
    const peers = all.map((p, r) => {
      // A local peer (on the shm segment) by its host, not a search of the host's ranks for each peer.
      if (r === rank || (local && topo.hostOf[r] === topo.hostOf[rank])) return null;
      return { host: peerAddress(p, r, topo.hostOf[r] === topo.hostOf[rank], plan.addresses), port: p.port };
    });
    await ready.connect(peers);
    return ready;
  } catch (err) {
    comm?.close();
    throw err;
  }
}
