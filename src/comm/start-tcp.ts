// Starts the tcp backend once the ranks have met: every rank opens an endpoint and the ranks exchange where
// they listen; each connection then opens on first use. With `shmWithinHosts` (backend auto on hosts that hold several ranks) the
// ranks of one host share a segment and only ranks on different hosts talk over tcp ("shm+tcp").
import { randomBytes } from "node:crypto";
import type { Place } from "../env/place.js";
import type { Bootstrap } from "./bootstrap.js";
import { native, type NativeCommunicator, type NativeTcpEndpoint } from "./native.js";
import { listenPlan, peerAddress, type ListenPlan, type Published } from "./tcp-address.js";
import type { Topology } from "./topology.js";

export interface TcpStartOptions {
  /** What a peer proves it knows when it connects: the job secret's key for the tcp transport (secret.ts), hex. */
  key: string;
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
  try {
    // The host's lowest rank creates the segment before it publishes the name, so the others can attach
    // as soon as the exchange returns.
    let segment = "";
    if (local && local[0] === rank) {
      segment = `/spmd-${process.pid}-${randomBytes(6).toString("hex")}`;
      comm = new Communicator({ backend: "tcp", rank, size, key, endpoint, nodeOf: topo.hostOf, local: { name: segment, singleCopy: o.singleCopy, sharesCores: o.sharesCores } });
    }
    const mine: Published & { segment: string } = { port: endpoint.port, bound: endpoint.address, addresses: plan.addresses, segment };
    const all = (await boot.allGather("tcp/endpoint", JSON.stringify(mine))).map((s) => JSON.parse(s) as typeof mine);
    comm ??= new Communicator({ backend: "tcp", rank, size, key, endpoint, nodeOf: topo.hostOf, ...(local && { local: { name: all[local[0]!]!.segment, singleCopy: o.singleCopy, sharesCores: o.sharesCores } }) });
    const peers = all.map((p, r) => {
      if (r === rank || local?.includes(r)) return null;
      return { host: peerAddress(p, r, topo.hostOf[r] === topo.hostOf[rank], plan.addresses), port: p.port };
    });
    await comm.connect(peers);
    // Everyone is attached: the segment's name is no longer needed, and unlinking it now means no crash can
    // leak it.
    await boot.barrier("tcp/attached");
    comm.release();
    return comm;
  } catch (err) {
    comm?.close();
    throw err;
  }
}
