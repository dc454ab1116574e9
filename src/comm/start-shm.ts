// Starts the shm backend once the ranks have met: one segment for a job whose ranks all share a host.
import { randomBytes } from "node:crypto";
import type { Place } from "../env/place.js";
import type { Bootstrap } from "./bootstrap.js";
import { BackendError } from "./errors.js";
import { native, type NativeCommunicator } from "./native.js";
import { describeHosts, type Topology } from "./topology.js";

/** Rank 0 creates the segment, the others attach to the name it sends. */
export async function startShm(boot: Bootstrap, place: Place, topo: Topology, sharesCores: boolean): Promise<NativeCommunicator> {
  const { rank, size } = place;
  if (topo.hosts.length > 1) {
    throw new BackendError(`backend shm: ranks run on several hosts (${describeHosts(topo.hosts)}) and shm needs one; use --backend tcp or auto`);
  }
  const Communicator = native().Communicator;
  let comm: NativeCommunicator | undefined;
  try {
    let name: string | undefined;
    if (rank === 0) {
      name = `/spmd-${process.pid}-${randomBytes(6).toString("hex")}`;
      comm = new Communicator({ backend: "shm", name, rank, size, create: true, sharesCores });
    }
    name = await boot.broadcast("shm/name", name);
    comm ??= new Communicator({ backend: "shm", name, rank, size, create: false, sharesCores });
    // Once everyone is attached the name is no longer needed: unlinking now means no crash can leak it.
    await boot.barrier("shm/attached");
    comm.release();
    return comm;
  } catch (err) {
    comm?.close();
    throw err;
  }
}
