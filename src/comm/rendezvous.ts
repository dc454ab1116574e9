// Brings all ranks of a job together on the TCP store hosted by rank 0.

import net from "node:net";
import { StoreClient, StoreServer } from "./store.js";

export interface RendezvousOptions {
  rank: number;
  size: number;
  addr: string;
  port: number;
  token: string;
  timeoutMs: number;
  /** Rank 0's debug log: each connection to its store closed before it proved it holds the token. */
  refused?: (line: string) => void;
}

export interface Rendezvous {
  store: StoreClient;
  /** Present on rank 0, which hosts the store. */
  server?: StoreServer;
  /**
   * Leaves the store. Rank 0 keeps serving until every rank has left, unless `abandon` is set (after a
   * failure a dead rank would never say it left, so waiting would only delay the error).
   */
  close(opts?: { abandon?: boolean }): Promise<void>;
}

const JOINED = "rendezvous/joined";
/**
 * How long rank 0 keeps serving after the ranks failed to meet: the others' deadlines pass a moment after
 * its own (they connected later), and each then reads who never arrived. Only here: after a failure later
 * on, a launcher ends the other ranks as soon as one exits, and waiting would cost rank 0 its own message.
 */
const GRACE_MS = 2000;
const grace = () => new Promise((resolve) => setTimeout(resolve, GRACE_MS));
const CLOSED = "rendezvous/closed";
const ALL_CLOSED = "rendezvous/closed/all";

export async function rendezvous(opts: RendezvousOptions): Promise<Rendezvous> {
  if (!Number.isInteger(opts.size) || opts.size < 1 || !Number.isInteger(opts.rank) || opts.rank < 0 || opts.rank >= opts.size) {
    throw new Error(`rendezvous: rank ${opts.rank} does not fit a world of size ${opts.size}`);
  }
  // A host name may resolve to another address on rank 0's own host than elsewhere (Debian maps the host's
  // own name to 127.0.1.1, and SLURM's master is a node name): rank 0 then listens on every interface, as
  // torch's TCPStore does. An IP address is listened on as given.
  const host = net.isIP(opts.addr) ? opts.addr : undefined;
  const server = opts.rank === 0 ? await StoreServer.listen({ host, port: opts.port, token: opts.token, refused: opts.refused }) : undefined;
  let store: StoreClient | undefined;
  try {
    store = await StoreClient.connect({
      host: opts.addr,
      port: server?.port ?? opts.port,
      token: opts.token,
      rank: opts.rank,
      timeoutMs: opts.timeoutMs,
    });
    await store.barrier(JOINED, opts.size, opts.timeoutMs);
  } catch (err) {
    store?.close();
    // Rank 0 says what came instead of the ranks it waited for.
    if (server && err instanceof Error) err.message += server.strangersNote();
    if (server) await grace();
    await server?.close();
    throw err;
  }
  const joined = store;
  let closing: Promise<void> | undefined;
  return {
    store: joined,
    server,
    close: (how) => (closing ??= leave(joined, server, opts, how?.abandon ?? false)),
  };
}

async function leave(store: StoreClient, server: StoreServer | undefined, opts: RendezvousOptions, abandon: boolean): Promise<void> {
  try {
    if (abandon) return;
    if ((await store.add(CLOSED, 1)) === opts.size) await store.set(ALL_CLOSED, "1");
    // Rank 0 keeps the store up until every rank is done with it, but only for the
    // timeout: a rank that died will never say so.
    if (server) await store.wait([ALL_CLOSED], opts.timeoutMs);
  } catch {
    // Leaving is best effort. A rank or store that went away is reported by whatever
    // was using it; failing close() as well would only hide that first error.
  } finally {
    store.close();
    await server?.close();
  }
}
