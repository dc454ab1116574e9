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
 * How this rank may move large messages (SPMD_SHM_SINGLE_COPY): 1, the default, single-copy from sizes the ranks
 * time at start-up; fixed, single-copy from the defaults untimed, so that every launch takes the same paths (for
 * campaigns compared for regressions); 0, staging every byte through the segment. One rank's 0 stages every rank,
 * one rank's fixed leaves every rank untimed.
 */
function singleCopyMode(env: NodeJS.ProcessEnv): "0" | "1" | "fixed" {
  const v = env.SPMD_SHM_SINGLE_COPY ?? "1";
  if (v !== "0" && v !== "1" && v !== "fixed") throw new BackendError(`environment: SPMD_SHM_SINGLE_COPY=${v} is not 0, 1 or fixed`);
  return v;
}

/** Whether this rank may move large messages single-copy (singleCopyMode 1 or fixed). */
export const singleCopyAllowed = (env: NodeJS.ProcessEnv) => singleCopyMode(env) !== "0";

/** Whether this rank lets the ranks time from which sizes single copy moves (singleCopyMode 1). */
export const copyPathTimed = (env: NodeJS.ProcessEnv) => singleCopyMode(env) === "1";

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
  const [singleCopy, timedCopyPath] = [singleCopyAllowed(env), copyPathTimed(env)];
  let comm: NativeCommunicator | undefined;
  try {
    const open = (name: string, create: boolean) => {
      comm = new Communicator({ backend: "shm", name, tag: segmentTag(secret, name), rank, size, create, sharesCores, singleCopy, timedCopyPath });
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
