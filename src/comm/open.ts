import { randomBytes } from "node:crypto";
import os from "node:os";
import type { Backend } from "../config/run-config.js";
import type { Place } from "../env/place.js";
import { native, type NativeCommunicator } from "./native.js";
import { rendezvous, type Rendezvous } from "./rendezvous.js";

/** The user asked for something this build or this placement cannot do (exit code 2). */
export class BackendError extends Error {
  readonly exitCode = 2;
}

export interface OpenOptions {
  place: Place;
  backend: Backend;
  token: string;
  timeoutMs: number;
  addr?: string;
  port?: number;
}

export interface OpenCommunicator {
  comm: NativeCommunicator;
  /** Present when the ranks met on the TCP store (size > 1). */
  store?: Rendezvous["store"];
  /** `failed`: leave at once, without waiting for peers that may be dead. */
  close(failed?: boolean): Promise<void>;
}

/** Resolves "auto" and rejects what cannot run here, before any rank starts a backend. */
function chooseBackend(requested: Backend, sameHost: boolean, hosts: string[]): "shm" {
  const built = native().backends;
  if (requested === "auto" || requested === "shm") {
    if (!sameHost) {
      throw new BackendError(
        `backend ${requested}: ranks run on several hosts (${[...new Set(hosts)].join(", ")}) and shm needs one; ` +
          `the tcp backend is not built yet`,
      );
    }
    return "shm";
  }
  throw new BackendError(`backend ${requested} is not available in this build (built: ${built.join(", ")}); see "node runner info"`);
}

/** Meets the other ranks and starts the native communicator every stage runs on. */
export async function openCommunicator(o: OpenOptions): Promise<OpenCommunicator> {
  const { rank, size } = o.place;
  const name = `/spmd-${process.pid}-${randomBytes(6).toString("hex")}`;
  if (size === 1) {
    chooseBackend(o.backend, true, []);
    const comm = new (native().Communicator)({ backend: "shm", name, rank, size, create: true });
    comm.release();
    return { comm, close: async () => comm.close() };
  }
  const addr = o.addr ?? o.place.master?.addr;
  const port = o.port ?? o.place.master?.port;
  if (!addr || port === undefined) {
    throw new BackendError(
      `rendezvous: ${size} ranks need MASTER_ADDR and MASTER_PORT (or rendezvous.addr/port in the run config); ` +
        `MPI bootstrap needs the mpi backend, which is not built yet`,
    );
  }
  const rdv = await rendezvous({ rank, size, addr, port, token: o.token, timeoutMs: o.timeoutMs });
  let comm: NativeCommunicator | undefined;
  try {
    const { store } = rdv;
    await store.set(`host/${rank}`, os.hostname());
    const hosts = await Promise.all(Array.from({ length: size }, async (_, r) => (await store.get(`host/${r}`, o.timeoutMs)).toString()));
    chooseBackend(o.backend, hosts.every((h) => h === hosts[0]), hosts);
    if (rank === 0) {
      comm = new (native().Communicator)({ backend: "shm", name, rank, size, create: true });
      await store.set("shm/name", name);
    } else {
      const shared = (await store.get("shm/name", o.timeoutMs)).toString();
      comm = new (native().Communicator)({ backend: "shm", name: shared, rank, size, create: false });
    }
    // Once everyone is attached the name is no longer needed: unlinking now means no crash can leak it.
    await store.barrier("shm/attached", size, o.timeoutMs);
    comm.release();
  } catch (err) {
    comm?.close();
    await rdv.close({ abandon: true });
    throw err;
  }
  const opened = comm;
  return {
    comm: opened,
    store: rdv.store,
    close: async (failed = false) => {
      opened.close();
      await rdv.close({ abandon: failed });
    },
  };
}
