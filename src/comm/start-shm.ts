// Starts the shm backend once the ranks have met: one segment for a job whose ranks all share a host.
import type { Place } from "../env/place.js";
import type { Bootstrap } from "./bootstrap.js";
import { BackendError } from "./errors.js";
import { native, type NativeCommunicator } from "./native.js";
import { segmentTag, type JobSecret } from "./secret.js";
import { segmentName } from "./shm-names.js";
import { allOrNone } from "./startup.js";
import { describeHosts, type Topology } from "./topology.js";

/**
 * Whether this rank may move large messages single-copy (SPMD_SHM_SINGLE_COPY: 1, the default, or 0 to
 * stage every byte through the segment, as every rank then does).
 */
export function singleCopyAllowed(env: NodeJS.ProcessEnv): boolean {
  const v = env.SPMD_SHM_SINGLE_COPY ?? "1";
  if (v !== "0" && v !== "1") throw new BackendError(`environment: SPMD_SHM_SINGLE_COPY=${v} is not 0 or 1`);
  return v === "1";
}

/**
 * Rank 0 creates the segment, the others attach to the name it sends; then they agree on single copy. A rank
 * that cannot (a full /dev/shm, a segment that is not the job's) fails them all at once (allOrNone).
 */
export async function startShm(boot: Bootstrap, place: Place, topo: Topology, sharesCores: boolean, env: NodeJS.ProcessEnv, secret: JobSecret): Promise<NativeCommunicator> {
  const { rank, size } = place;
  if (topo.hosts.length > 1) {
    throw new BackendError(`backend shm: ranks run on several hosts (${describeHosts(topo.hosts)}) and shm needs one; use --backend tcp or auto`);
  }
  const Communicator = native().Communicator;
  const singleCopy = singleCopyAllowed(env);
  let comm: NativeCommunicator | undefined;
  try {
    const open = (name: string, create: boolean) => {
      comm = new Communicator({ backend: "shm", name, tag: segmentTag(secret, name), rank, size, create, sharesCores, singleCopy });
      return name;
    };
    const [name] = await allOrNone(boot, "shm/name", () => (rank === 0 ? open(segmentName(), true) : ""));
    // Once everyone is attached the name is no longer needed: unlinking now means no crash can leak it.
    await allOrNone(boot, "shm/attached", () => (rank === 0 ? "" : open(name!, false)));
    const ready = comm!;
    ready.release();
    await ready.connect();
    return ready;
  } catch (err) {
    comm?.close();
    throw err;
  }
}
