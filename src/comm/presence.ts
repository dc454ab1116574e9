// A presence board on the TCP store, for the tcp backend, whose ranks cannot see each other's progress the
// way shm ranks read it from their segment: while a run is in flight each rank posts its place in the op
// sequence and the time, a few times a second, from its event loop (free while native code runs the ops).
// When a deadline passes, the rank reads the board: a rank whose last post is old is stopped or gone, and
// native code words the finding as it does on shm ("rank 2 silent for 10.0 s, inside it"). Times are each
// host's wall clock, which NTP keeps within milliseconds, far below the one second that counts as silence.
import type { Bootstrap } from "./bootstrap.js";
import type { NativeCommunicator, PeerSighting } from "./native.js";

const BEAT_MS = 250;
/** How long a reader waits for the store at a deadline: a store that does not answer is itself the finding. */
const ASK_MS = 1000;
/**
 * How long rank 0, failing, keeps serving the board for the others, whose deadlines pass a moment after its
 * own: leaving at once, it would be named by them as the rank that did not answer. Under the launcher's
 * settle time (2 s), so that no SIGTERM cuts its own message short.
 */
const LINGER_MS = 1500;
/** A rank that has not posted for this long has stopped posting (stopped, gone, or wedged). */
const STALE_MS = 2 * BEAT_MS;

interface Post {
  position: number;
  t: number;
  /** The rank is leaving after a failure of its own: its posts stop, but it is not silent. */
  left?: boolean;
}

const key = (rank: number) => `presence/${rank}`;

export interface PresenceBoard {
  /** The deadline message's tail naming the silent ranks, else those behind ("" when the board shows none). */
  stragglers(): Promise<string>;
  /** Stops posting; `failed`: marks this rank as leaving, so that no reader takes it for stopped. */
  stop(failed: boolean): Promise<void>;
}

type Store = NonNullable<Bootstrap["store"]>;

async function read(store: Store, rank: number): Promise<Post | undefined> {
  try {
    return JSON.parse((await store.get(key(rank), ASK_MS)).toString()) as Post;
  } catch {
    return undefined;
  }
}

async function sighting(store: Store, rank: number, now: number): Promise<PeerSighting> {
  const post = await read(store, rank);
  if (!post) return { rank, answered: false, position: 0, silentSec: -1 };
  return { rank, answered: true, position: post.position, silentSec: post.left ? 0 : (now - post.t) / 1000 };
}

const othersThan = (comm: NativeCommunicator) => Array.from({ length: comm.size }, (_, r) => r).filter((r) => r !== comm.rank);

/** Every other rank has left after its own failure, or stopped posting: none will read the board any more. */
async function noneStillReading(store: Store, comm: NativeCommunicator): Promise<boolean> {
  const posts = await Promise.all(othersThan(comm).map((r) => read(store, r)));
  return posts.every((p) => !p || p.left || Date.now() - p.t > STALE_MS);
}

async function lingerForReaders(store: Store, comm: NativeCommunicator): Promise<void> {
  const until = Date.now() + LINGER_MS;
  while (Date.now() < until && !(await noneStillReading(store, comm))) await new Promise((r) => setTimeout(r, BEAT_MS / 5));
}

export function startPresence(comm: NativeCommunicator, store: Store): PresenceBoard {
  const post = (p: Omit<Post, "position" | "t"> = {}) =>
    store.set(key(comm.rank), JSON.stringify({ position: comm.position, t: Date.now(), ...p } satisfies Post)).catch(() => {});
  void post();
  const timer = setInterval(() => void post(), BEAT_MS).unref();
  return {
    stragglers: async () => {
      const now = Date.now();
      const seen = await Promise.all(othersThan(comm).map((r) => sighting(store, r, now)));
      // Rank 0 hosts the store: when it does not answer, nobody on the board could.
      const host = seen.find((s) => s.rank === 0);
      return comm.stragglers(host && !host.answered ? [host] : seen);
    },
    stop: async (failed) => {
      clearInterval(timer);
      // Bounded: a store behind a link that went down answers nothing, not even an error.
      if (failed) await Promise.race([post({ left: true }), new Promise((resolve) => setTimeout(resolve, ASK_MS).unref())]);
      if (failed && comm.rank === 0) await lingerForReaders(store, comm);
    },
  };
}
