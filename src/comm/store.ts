// Rendezvous key-value store (in the manner of torch's TCPStore): rank 0 hosts a
// StoreServer at MASTER_ADDR:MASTER_PORT, every rank talks to it through a StoreClient.
// Peers must prove they hold the job token (a challenge-response, store-protocol.ts) before they are served
// anything, and the token never travels. Unlike TCPStore, no rank
// holds a connection while it waits (store-protocol.ts): rank 0 serves a few at a time and
// dials waiting ranks back, as NCCL's bootstrap root does, so its descriptors do not grow
// with the ranks.

import { randomBytes } from "node:crypto";
import net from "node:net";
import {
  DEFAULT_MAX_FRAME_BYTES,
  FrameReader,
  MAX_HELLO_FRAME_BYTES,
  NONCE_BYTES,
  ProtocolError,
  decodeMessage,
  encodeMessage,
  fitsI64,
  formatAddress,
  handshakeMac,
  isReply,
  macMatches,
  parseCounter,
  payloadOf,
  timeoutMessage,
  type Message,
  type Reply,
  type Request,
} from "./store-protocol.js";

const WRONG_TOKEN = "wrong job token";
const U32_MAX = 0xffff_ffff;
// setTimeout fires at once for longer delays, so waits are clamped to this.
const MAX_TIMER_MS = 2 ** 31 - 1;
// The server enforces GET/WAIT timeouts; the client's own timer only covers a server
// that stopped answering altogether, so it fires a little later.
const CLIENT_GUARD_MS = 2000;
const RETRYABLE_CONNECT_ERRORS = new Set(["ECONNREFUSED", "ECONNRESET"]);

// ---------------------------------------------------------------- server

/**
 * Authenticated connections rank 0 serves at once: past this a rank that proved itself is closed and dials
 * again, so that its descriptors do not grow with the ranks (nobody holds one while waiting). Connections
 * still proving themselves do not count: strangers cannot take the ranks' places.
 */
const MAX_CONNECTIONS = 16;
/** How long a connection has to prove it holds the token (a round trip for a rank) before it is closed. */
const AUTH_DEADLINE_MS = 3000;
/**
 * Connections still proving themselves, at most: a new one past this closes the oldest, so that a flood of
 * idle connections cannot exhaust rank 0's descriptors, and a rank's handshake (a round trip) gets through.
 * The tcp backend's listeners hold the same (backends/tcp/connector.cc).
 */
const MAX_UNAUTHENTICATED = 256;

/**
 * Connections still proving they hold the token, oldest first: each has AUTH_DEADLINE_MS, and one past
 * MAX_UNAUTHENTICATED closes the oldest, never the newcomer. `drop(item, why)` closes one; it is no longer
 * counted by then.
 */
class Unproven<T> {
  private readonly deadlines = new Map<T, NodeJS.Timeout>();

  constructor(private readonly drop: (item: T, why: string) => void) {}

  get size(): number {
    return this.deadlines.size;
  }

  add(item: T): void {
    if (this.deadlines.size >= MAX_UNAUTHENTICATED) {
      this.close(this.deadlines.keys().next().value!, `crowded out by ${MAX_UNAUTHENTICATED} newer connections that had not proved themselves`);
    }
    this.deadlines.set(item, setTimeout(() => this.close(item, `no handshake within ${AUTH_DEADLINE_MS / 1000} s`), AUTH_DEADLINE_MS).unref());
  }

  /** Proved, or gone: no longer counted. */
  delete(item: T): void {
    clearTimeout(this.deadlines.get(item));
    this.deadlines.delete(item);
  }

  /** Closes every one: nothing is owed to them (the process leaves, and they must not keep it). */
  closeAll(why: string): void {
    for (const item of [...this.deadlines.keys()]) this.close(item, why);
  }

  private close(item: T, why: string): void {
    this.delete(item);
    this.drop(item, why);
  }
}

interface Connection {
  readonly socket: net.Socket;
  readonly peer: string;
  authenticated: boolean;
  /** What this connection's HELLO must cover. */
  readonly nonce: Buffer;
  rank: number;
  /** Where parked answers go: the client's address and the port its HELLO named (none: port 0). */
  replyTo?: ReplyTarget;
  /** Set once the connection is being torn down: nothing more is read or answered. */
  done: boolean;
  /** Replies in request order; a slot without a frame is a request not answered yet. */
  readonly replies: Array<{ frame?: Buffer }>;
}

interface Waiter {
  readonly missing: Set<string>;
  readonly timer: NodeJS.Timeout;
  readonly onReady: () => void;
}

interface ReplyTarget {
  host: string;
  port: number;
}

/** Answers being dialled back at once, at most: each is a descriptor on rank 0. */
const DIALS = 4;
/** A client that does not take its answers after this many dials (it has exited) gets none. */
const DIAL_TRIES = 4;
/**
 * How long a closing server still carries the answers already due, and serves the links still open: a rank
 * that left right after an exchange (failing, say) must not leave the others without the answer it completed.
 */
const DRAIN_MS = 1000;

/** Resolves when the function handed to `arm` is called, or after DRAIN_MS. */
function drainWithin(arm: (done: () => void) => void): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, DRAIN_MS);
    arm(() => (clearTimeout(timer), resolve()));
  });
}

/** The nonce of the CHALLENGE that opens a connection; undefined until it has arrived, null if something else came. */
function challengeIn(reader: FrameReader): Buffer | undefined | null {
  try {
    const payload = reader.next();
    if (payload === undefined) return undefined;
    const msg = decodeMessage(payload);
    return msg.type === "challenge" && msg.nonce.length === NONCE_BYTES ? msg.nonce : null;
  } catch {
    return null;
  }
}

/** The OKs a client's inbox sent back, one per answer it took; null if something else came. */
function acksIn(reader: FrameReader): number | null {
  let n = 0;
  try {
    for (let payload = reader.next(); payload !== undefined; payload = reader.next(), n++) if (decodeMessage(payload).type !== "ok") return null;
  } catch {
    return null;
  }
  return n;
}

interface Outbox {
  readonly target: ReplyTarget;
  frames: Buffer[];
  tries: number;
  /** A dial is under way, or the next waits out a pause after a failed one. */
  busy: boolean;
}

/**
 * Carries parked answers back: to each client one connection at a time, with every answer due to it so far
 * (the server's HELLO first), at most DIALS at once. An answer is delivered once the client's inbox has sent
 * an OK for it: a write the kernel took is still lost when the inbox gives up first, which it does when its
 * handshake deadline passes while a lost segment waits out a retransmission (3 s after a retransmitted SYN;
 * test/lossy-network.test.js at 5% loss lost a barrier's release so). A dial that ends with answers not
 * acknowledged is tried again, with those answers, after a pause.
 */
class Courier {
  private readonly outboxes = new Map<string, Outbox>();
  private readonly sockets = new Set<net.Socket>();
  private closed = false;
  private drained?: () => void;

  constructor(private readonly token: string) {}

  send(target: ReplyTarget, frame: Buffer): void {
    if (this.closed) return;
    const key = formatAddress(target.host, target.port);
    let box = this.outboxes.get(key);
    if (!box) this.outboxes.set(key, (box = { target, frames: [], tries: 0, busy: false }));
    box.frames.push(frame);
    this.pump();
  }

  /** Carries what is due (for at most DRAIN_MS), then drops the rest. */
  async close(): Promise<void> {
    if (this.outboxes.size > 0) await drainWithin((done) => (this.drained = done));
    this.closed = true;
    for (const socket of this.sockets) socket.destroy();
    this.outboxes.clear();
  }

  private pump(): void {
    for (const [key, box] of this.outboxes) {
      if (this.sockets.size >= DIALS) return;
      if (box.busy) continue;
      if (box.frames.length > 0) this.dial(box);
      else this.outboxes.delete(key);
    }
    if (this.outboxes.size === 0) this.drained?.();
  }

  private dial(box: Outbox): void {
    const frames = box.frames.splice(0);
    box.busy = true;
    let taken = 0;
    const socket = net.createConnection(box.target);
    this.sockets.add(socket);
    socket.setNoDelay(true);
    // The client's inbox challenges first; the answers follow the proof at once, and its OKs come back.
    const reader = new FrameReader(MAX_HELLO_FRAME_BYTES);
    let proved = false;
    socket.on("data", (chunk: Buffer) => {
      reader.push(chunk);
      if (!proved) {
        const nonce = challengeIn(reader);
        if (nonce === null) return void socket.destroy();
        if (nonce === undefined) return;
        proved = true;
        const hello = encodeMessage({ type: "hello", rank: 0, replyPort: 0, nonce: Buffer.alloc(0), mac: handshakeMac(this.token, "hello", nonce, 0, 0) });
        socket.write(Buffer.concat([hello, ...frames]));
      }
      const acks = acksIn(reader);
      if (acks === null) return void socket.destroy();
      taken += acks;
      if (taken >= frames.length) socket.end();
    });
    socket.on("error", () => {}); // the dial failed: "close" tries again
    socket.on("close", () => {
      this.sockets.delete(socket);
      const left = frames.slice(taken);
      if (left.length === 0 || this.closed || ++box.tries >= DIAL_TRIES) {
        box.busy = false;
        box.tries = 0;
      } else {
        box.frames.unshift(...left);
        setTimeout(() => {
          box.busy = false;
          this.pump();
        }, 100 * 2 ** box.tries).unref();
      }
      this.pump();
    });
  }
}

export class StoreServer {
  /** The address listened on: as asked, or "::" / "0.0.0.0" for every interface. */
  readonly host: string;
  readonly port: number;
  private readonly values = new Map<string, Buffer>();
  private readonly waitersByKey = new Map<string, Set<Waiter>>();
  private readonly connections = new Set<Connection>();
  private readonly unauthenticated = new Unproven<Connection>((conn, why) => this.drop(conn, why));
  /** Connections closed before they proved the token: how many, and the first few hosts they came from. */
  private readonly strangers = { count: 0, hosts: new Set<string>() };
  private readonly courier: Courier;
  private closing = false;
  private allClosed?: () => void;

  private constructor(
    private readonly server: net.Server,
    private readonly token: string,
    private readonly maxFrameBytes: number,
    private readonly refused: (line: string) => void,
  ) {
    ({ address: this.host, port: this.port } = server.address() as net.AddressInfo);
    this.courier = new Courier(token);
    server.on("connection", (socket) => this.accept(socket));
    // Failed accepts (e.g. EMFILE) must not take rank 0 down; the peer retries.
    server.on("error", () => {});
  }

  /**
   * Without `host`, on every interface (IPv6 and IPv4 where the host has IPv6). `refused`: told once, for the
   * debug log, of each connection closed before it proved itself, with its peer's address.
   */
  static listen(opts: { host?: string; port: number; token: string; maxFrameBytes?: number; refused?: (line: string) => void }): Promise<StoreServer> {
    const server = net.createServer();
    return new Promise((resolve, reject) => {
      server.once("error", (err: NodeJS.ErrnoException) => {
        const why = err.code === "EADDRINUSE" ? "address in use" : err.message;
        reject(new Error(`rendezvous: cannot listen on ${formatAddress(opts.host ?? "*", opts.port)}: ${why}`));
      });
      server.listen({ host: opts.host, port: opts.port }, () => {
        server.removeAllListeners("error");
        resolve(new StoreServer(server, opts.token, opts.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES, opts.refused ?? (() => {})));
      });
    });
  }

  /**
   * Serves no new link from now on. A request already on an open link is still answered where it can be at
   * once: rank 0 may leave (failing) right after an exchange it completed, while another rank's request for
   * that exchange's answer is on its way. A request that would have to wait is refused by dropping its
   * link. Stops listening once the clients have closed their links (a client closes one as soon as nothing
   * on it is unanswered) and the answers already due are carried, for at most DRAIN_MS.
   */
  async close(): Promise<void> {
    this.closing = true;
    // Connections that never proved themselves are no rank's: nothing is owed to them.
    this.unauthenticated.closeAll("the store closed");
    for (const waiters of this.waitersByKey.values()) for (const w of waiters) clearTimeout(w.timer);
    this.waitersByKey.clear();
    // Still listening meanwhile, so that a waiting rank's check does not take rank 0 for gone before its
    // answer arrives.
    await Promise.all([this.linksClosed(), this.courier.close()]);
    for (const conn of this.connections) conn.socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** Resolves once no client holds a link, or after DRAIN_MS (a stopped rank never closes its own). */
  private linksClosed(): Promise<void> {
    if (this.connections.size === 0) return Promise.resolve();
    return drainWithin((done) => (this.allClosed = done));
  }

  private accept(socket: net.Socket): void {
    if (this.closing) return void socket.destroy();
    const conn: Connection = {
      socket,
      peer: formatAddress(socket.remoteAddress ?? "unknown", socket.remotePort ?? 0),
      authenticated: false,
      nonce: randomBytes(NONCE_BYTES),
      rank: -1,
      done: false,
      replies: [],
    };
    this.connections.add(conn);
    // Until it proves itself the connection does not count toward MAX_CONNECTIONS.
    this.unauthenticated.add(conn);
    const reader = new FrameReader(Math.min(MAX_HELLO_FRAME_BYTES, this.maxFrameBytes));
    socket.setNoDelay(true);
    socket.write(encodeMessage({ type: "challenge", nonce: conn.nonce }));
    // A peer vanishing is routine; "close" does the cleanup.
    socket.on("error", () => {});
    socket.on("close", () => this.forget(conn));
    socket.on("data", (chunk: Buffer) => {
      if (conn.done) return;
      reader.push(chunk);
      try {
        for (let payload = reader.next(); payload !== undefined && !conn.done; payload = reader.next()) {
          this.handle(conn, decodeMessage(payload));
          if (conn.authenticated) reader.maxFrameBytes = this.maxFrameBytes;
        }
      } catch (err) {
        // Anything before authentication gets the same answer, so a stranger learns nothing.
        const detail = err instanceof Error ? err.message : String(err);
        if (!conn.authenticated) this.refuse(conn, detail);
        this.reject(
          conn,
          conn.authenticated
            ? `rendezvous: malformed frame from rank ${conn.rank} at ${conn.peer}: ${detail}`
            : `rendezvous: ${WRONG_TOKEN} from ${conn.peer}`,
        );
      }
    });
  }

  /** Counts and logs a connection closed before it proved itself. */
  private refuse(conn: Connection, why: string): void {
    this.strangers.count++;
    if (this.strangers.hosts.size < 3) this.strangers.hosts.add(conn.socket.remoteAddress ?? "?");
    this.refused(`rendezvous: refused a connection from ${conn.peer}: ${why}`);
  }

  /** For a failed rendezvous's message: "; meanwhile rank 0's store closed N connections ...", or "". */
  strangersNote(): string {
    const { count, hosts } = this.strangers;
    if (count === 0) return "";
    return `; meanwhile rank 0's store closed ${count} connection${count === 1 ? "" : "s"} that never proved the job's secret, from ${[...hosts].join(", ")}`;
  }

  /** Closes a connection that has not proved itself, without a word to it. */
  private drop(conn: Connection, why: string): void {
    this.refuse(conn, why);
    this.forget(conn);
    conn.socket.destroy();
  }

  private handle(conn: Connection, msg: Message): void {
    if (!conn.authenticated) return this.admit(conn, msg);

    const reply = this.slot(conn);
    switch (msg.type) {
      case "set":
        this.store(msg.key, msg.value);
        reply(encodeMessage({ type: "ok" }));
        return;
      case "get":
        this.whenPresent(conn, msg.id, [msg.key], msg.timeoutMs, reply, () => ({ type: "value", value: this.values.get(msg.key)! }));
        return;
      case "wait":
        this.whenPresent(conn, msg.id, msg.keys, msg.timeoutMs, reply, () => ({ type: "ok" }));
        return;
      case "getall":
        this.whenPresent(conn, msg.id, msg.keys, msg.timeoutMs, reply, () => ({ type: "values", values: msg.keys.map((k) => this.values.get(k)!) }));
        return;
      case "add":
        reply(this.add(msg.key, msg.delta));
        return;
      default:
        throw new ProtocolError(`unexpected ${msg.type} message`);
    }
  }

  /** A HELLO that proves the token makes the connection its rank's; anything else is refused. */
  private admit(conn: Connection, msg: Message): void {
    if (msg.type !== "hello" || !macMatches(msg.mac, handshakeMac(this.token, "hello", conn.nonce, msg.rank, msg.replyPort))) {
      throw new ProtocolError(WRONG_TOKEN);
    }
    this.unauthenticated.delete(conn);
    // Shedding load: the rank dials again (its handshake takes a close without an answer for that).
    if (this.connections.size - this.unauthenticated.size > MAX_CONNECTIONS) {
      this.forget(conn);
      return void conn.socket.destroy();
    }
    conn.authenticated = true;
    conn.rank = msg.rank;
    if (msg.replyPort > 0 && msg.replyPort <= 0xffff) conn.replyTo = { host: conn.socket.remoteAddress!, port: msg.replyPort };
    this.slot(conn)(encodeMessage({ type: "welcome", mac: handshakeMac(this.token, "welcome", msg.nonce, msg.rank, msg.replyPort) }));
  }

  private add(key: string, delta: bigint): Buffer {
    const current = this.values.get(key);
    const base = current === undefined ? 0n : parseCounter(current);
    if (base === undefined) {
      return encodeMessage({ type: "error", message: `rendezvous: cannot add to key ${JSON.stringify(key)}: its value is not an integer` });
    }
    const next = base + delta;
    if (!fitsI64(next)) {
      return encodeMessage({ type: "error", message: `rendezvous: adding to key ${JSON.stringify(key)} overflows 64 bits` });
    }
    const text = Buffer.from(next.toString(), "latin1");
    this.store(key, text);
    return encodeMessage({ type: "value", value: text });
  }

  private store(key: string, value: Buffer): void {
    this.values.set(key, value);
    const waiters = this.waitersByKey.get(key);
    if (!waiters) return;
    this.waitersByKey.delete(key);
    for (const w of waiters) {
      w.missing.delete(key);
      if (w.missing.size === 0) {
        this.unregister(w);
        w.onReady();
      }
    }
  }

  /** Reserves the next reply position; the returned function fills it and flushes in order. */
  private slot(conn: Connection): (frame: Buffer) => void {
    const slot: { frame?: Buffer } = {};
    conn.replies.push(slot);
    return (frame) => {
      slot.frame = frame;
      while (!conn.done && conn.replies.length > 0 && conn.replies[0].frame) {
        conn.socket.write(conn.replies.shift()!.frame!);
      }
    };
  }

  /**
   * Answers at once when the keys are there (or `timeoutMs` is 0); otherwise answers PARKED and sends the
   * real answer to the client's reply port once the keys come or the time is up.
   */
  private whenPresent(conn: Connection, id: number, keys: string[], timeoutMs: number, reply: (frame: Buffer) => void, answer: () => Reply): void {
    const missing = new Set(keys.filter((k) => !this.values.has(k)));
    if (missing.size === 0) return reply(encodeMessage(answer()));
    const timedOut: Reply = { type: "error", message: timeoutMessage(keys, timeoutMs) };
    if (timeoutMs === 0) return reply(encodeMessage(timedOut));
    const target = conn.replyTo;
    if (!target) return reply(encodeMessage({ type: "error", message: "rendezvous: a wait needs a reply port in the HELLO" }));
    // Closing: nobody would answer it; the client names rank 0 as gone when its link drops.
    if (this.closing) return void conn.socket.destroy();
    reply(encodeMessage({ type: "parked" }));
    const send = (m: Reply) => this.courier.send(target, encodeMessage({ type: "answer", id, reply: payloadOf(m) }));
    const waiter: Waiter = {
      missing,
      onReady: () => send(answer()),
      timer: setTimeout(() => {
        this.unregister(waiter);
        send(timedOut);
      }, Math.min(timeoutMs, MAX_TIMER_MS)).unref(),
    };
    for (const key of missing) {
      let set = this.waitersByKey.get(key);
      if (!set) this.waitersByKey.set(key, (set = new Set()));
      set.add(waiter);
    }
  }

  private unregister(w: Waiter): void {
    clearTimeout(w.timer);
    for (const key of w.missing) {
      const set = this.waitersByKey.get(key);
      set?.delete(w);
      if (set?.size === 0) this.waitersByKey.delete(key);
    }
  }

  private reject(conn: Connection, message: string): void {
    this.forget(conn);
    conn.socket.end(encodeMessage({ type: "error", message }), () => conn.socket.destroy());
  }

  private forget(conn: Connection): void {
    conn.done = true;
    this.unauthenticated.delete(conn);
    this.connections.delete(conn);
    if (this.connections.size === 0) this.allClosed?.();
  }
}

// ---------------------------------------------------------------- client

interface Pending {
  /** Requests that may be parked (GET, WAIT, GETALL): the number its answer carries. */
  id?: number;
  resolve(msg: Reply): void;
  reject(err: Error): void;
  timer?: NodeJS.Timeout;
  /** Already settled (by its own timer, or by an answer that overtook the PARKED reply). */
  settled: boolean;
}

type Handshake =
  | { kind: "ok"; socket: net.Socket; reader: FrameReader }
  | { kind: "retry"; refused?: boolean }
  | { kind: "fatal"; error: Error };

interface DialOptions {
  host: string;
  port: number;
  token: string;
  rank: number;
  replyPort: number;
}

function unexpectedReply(address: string): Error {
  return new Error(`rendezvous: unexpected reply from ${address} (is another service using this port?)`);
}

function wireTimeout(ms: number): number {
  return Math.max(0, Math.min(Math.round(ms), U32_MAX));
}

function sleep(ms: number): Promise<void> {
  // Deliberately not unref'd: while a rank waits for rank 0 nothing else keeps it alive.
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** One connection attempt including HELLO; never rejects. */
function handshake(opts: DialOptions, address: string, budgetMs: number): Promise<Handshake> {
  return new Promise((resolve) => {
    const socket = net.createConnection({ host: opts.host, port: opts.port });
    const reader = new FrameReader(MAX_HELLO_FRAME_BYTES);
    let settled = false;
    const finish = (outcome: Handshake) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.off("connect", onConnect).off("data", onData).off("error", onError).off("close", onClose);
      // The no-op listener keeps a late socket error from becoming an uncaught exception.
      if (outcome.kind !== "ok") socket.on("error", () => {}).destroy();
      resolve(outcome);
    };
    const timer = setTimeout(() => finish({ kind: "retry" }), Math.max(1, budgetMs));
    const nonce = randomBytes(NONCE_BYTES);
    const { rank, replyPort } = opts;
    let proved = false;
    const onConnect = () => socket.setNoDelay(true);
    const onData = (chunk: Buffer) => {
      reader.push(chunk);
      if (!proved) {
        const challenge = challengeIn(reader);
        if (challenge === undefined) return;
        if (challenge === null) return finish({ kind: "fatal", error: unexpectedReply(address) });
        proved = true;
        socket.write(encodeMessage({ type: "hello", rank, replyPort, nonce, mac: handshakeMac(opts.token, "hello", challenge, rank, replyPort) }));
      }
      let msg: Message;
      try {
        const payload = reader.next();
        if (payload === undefined) return;
        msg = decodeMessage(payload);
      } catch {
        return finish({ kind: "fatal", error: unexpectedReply(address) });
      }
      // The server proves it holds the token too: a stranger on the port learns nothing of this rank's requests.
      if (msg.type === "welcome" && macMatches(msg.mac, handshakeMac(opts.token, "welcome", nonce, rank, replyPort))) return finish({ kind: "ok", socket, reader });
      if (msg.type !== "error") return finish({ kind: "fatal", error: unexpectedReply(address) });
      const why = msg.message.includes(WRONG_TOKEN)
        ? `${WRONG_TOKEN} (is another job using this port?)`
        : msg.message;
      finish({ kind: "fatal", error: new Error(`rendezvous at ${address} rejected this rank: ${why}`) });
    };
    const onError = (err: NodeJS.ErrnoException) => {
      if (RETRYABLE_CONNECT_ERRORS.has(err.code ?? "")) return finish({ kind: "retry", refused: err.code === "ECONNREFUSED" });
      finish({ kind: "fatal", error: new Error(`rendezvous: cannot connect to ${address}: ${err.message}`) });
    };
    // Closed without an answer: the server was starting up or shedding load (MAX_CONNECTIONS).
    const onClose = () => finish({ kind: "retry" });
    socket.on("connect", onConnect).on("data", onData).on("error", onError).on("close", onClose);
  });
}

/**
 * A connection to the store, handshake done; retried (with growing, jittered pauses) until `deadline`.
 * `gone`: the error once the store cannot be reached, and at once when it refuses after it was up.
 */
async function dial(opts: DialOptions, address: string, deadline: number, gone: { error: () => Error; refusedIsFinal: boolean }): Promise<{ socket: net.Socket; reader: FrameReader }> {
  for (let pause = 20; ; pause = Math.min(2 * pause, 1000)) {
    const outcome = await handshake(opts, address, deadline - Date.now());
    if (outcome.kind === "ok") return outcome;
    if (outcome.kind === "fatal") throw outcome.error;
    const left = deadline - Date.now();
    if (left <= 0 || (outcome.refused && gone.refusedIsFinal)) throw gone.error();
    // Jittered: ranks turned away together do not all come back together.
    await sleep(Math.min(pause * (0.5 + Math.random()), left));
  }
}

/**
 * Where parked answers arrive, on a port the kernel picks: on loopback where the store is on loopback (it
 * dials back the address this rank's connection came from, which is then 127.0.0.1 or ::1), so no stranger
 * elsewhere can reach it; else on every interface, as which address the store sees is known only later.
 */
function openInbox(storeHost: string): Promise<net.Server> {
  const inbox = net.createServer();
  const host = net.isIPv4(storeHost) && storeHost.startsWith("127.") ? "127.0.0.1" : storeHost === "::1" ? "::1" : undefined;
  return new Promise((resolve, reject) => {
    inbox.once("error", (err) => reject(new Error(`rendezvous: cannot listen for the store's answers: ${err.message}`)));
    inbox.listen({ port: 0, host }, () => {
      inbox.removeAllListeners("error");
      inbox.on("error", () => {});
      resolve(inbox.unref());
    });
  });
}

/** How often a rank with parked requests and no connection checks that rank 0's store is still there. */
const PROBE_MS = 1000;

/** "; not arrived: rank 2, rank 5" (the first few of them), or "" when the store could not say. */
export function notArrived(ranks: number[]): string {
  if (ranks.length === 0) return "";
  const shown = ranks.slice(0, 8).map((r) => `rank ${r}`).join(", ");
  return `; not arrived: ${shown}${ranks.length > 8 ? ` and ${ranks.length - 8} more` : ""}`;
}

/**
 * A rank's side of the store. It holds a connection only while requests on it are unanswered; parked
 * requests are answered on its inbox (the reply port). While any are parked and no connection is open, it
 * checks once a second that rank 0 still listens, so that rank 0 leaving is seen at once, not at a timeout.
 */
export class StoreClient {
  /** The connection, while requests on it are unanswered (or it is being made). */
  private link?: Promise<net.Socket>;
  /** Requests sent on the link, in order: each gets one reply there (PARKED for a parked one). */
  private readonly queue: Pending[] = [];
  /** Requests that may be parked, by id, until answered: on the link, or later on the inbox. */
  private readonly waiting = new Map<number, Pending>();
  private nextId = 1;
  private probe?: NodeJS.Timeout;
  private failure?: Error;
  /** Connections to the inbox that have not proved they are the store's (as the store's own, Unproven). */
  private readonly unproven = new Unproven<net.Socket>((socket) => socket.destroy());

  private constructor(
    private readonly inbox: net.Server,
    private readonly opts: DialOptions,
    readonly address: string,
    private readonly timeoutMs: number,
  ) {
    inbox.on("connection", (socket) => this.takeAnswers(socket));
  }

  static async connect(opts: { host: string; port: number; token: string; rank: number; timeoutMs: number }): Promise<StoreClient> {
    const inbox = await openInbox(opts.host);
    const client = new StoreClient(inbox, { ...opts, replyPort: (inbox.address() as net.AddressInfo).port }, formatAddress(opts.host, opts.port), opts.timeoutMs);
    try {
      // The first handshake tells at once whether rank 0 is there and takes this job's token.
      const { socket, reader } = await dial(client.opts, client.address, Date.now() + opts.timeoutMs, {
        error: () => new Error(`rendezvous: could not reach ${client.address} within ${opts.timeoutMs / 1000} s (is rank 0 running?)`),
        refusedIsFinal: false,
      });
      // The first requests (the rendezvous' barrier) follow at once: they take this connection.
      client.link = Promise.resolve(client.attach(socket, reader));
      client.idle();
    } catch (err) {
      inbox.close();
      throw err;
    }
    return client;
  }

  async set(key: string, value: string | Uint8Array): Promise<void> {
    const buf = typeof value === "string" ? Buffer.from(value, "utf8") : Buffer.from(value);
    this.expect(await this.request({ type: "set", key, value: buf }), "ok");
  }

  /** Waits until the key exists, then returns its value. */
  async get(key: string, timeoutMs = this.timeoutMs): Promise<Buffer> {
    return this.expect(await this.request({ type: "get", id: this.nextId++, key, timeoutMs: wireTimeout(timeoutMs) }), "value").value;
  }

  /** Adds to an integer counter (missing counts as 0) and returns the new value. */
  async add(key: string, delta: number): Promise<number> {
    if (!Number.isSafeInteger(delta)) throw new TypeError(`rendezvous: add delta must be a safe integer, got ${delta}`);
    const reply = this.expect(await this.request({ type: "add", key, delta: BigInt(delta) }), "value");
    return Number(reply.value.toString("latin1"));
  }

  async wait(keys: string[], timeoutMs = this.timeoutMs): Promise<void> {
    this.expect(await this.request({ type: "wait", id: this.nextId++, keys, timeoutMs: wireTimeout(timeoutMs) }), "ok");
  }

  /** Waits until every key exists, then returns their values in order. */
  async getAll(keys: string[], timeoutMs = this.timeoutMs): Promise<Buffer[]> {
    return this.expect(await this.request({ type: "getall", id: this.nextId++, keys, timeoutMs: wireTimeout(timeoutMs) }), "values").values;
  }

  /** Returns once `size` callers have entered the barrier `name`; each name is single-use. */
  async barrier(name: string, size: number, timeoutMs = this.timeoutMs): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const countKey = `${name}/count`;
    const doneKey = `${name}/done`;
    const arrivedKey = (r: number) => `${name}/arrived/${r}`;
    await this.set(arrivedKey(this.opts.rank), "");
    const arrived = await this.add(countKey, 1);
    if (arrived > size) {
      throw new Error(`rendezvous: barrier ${JSON.stringify(name)} entered ${arrived} times for ${size} ranks (was the name reused?)`);
    }
    if (arrived === size) await this.set(doneKey, "1");
    try {
      await this.wait([doneKey], Math.max(0, deadline - Date.now()));
    } catch (err) {
      if (this.failure) throw err;
      // Say how far the barrier got: it tells which side of a hang to look at.
      const count = await this.get(countKey, 0).then((v) => v.toString(), () => "?");
      const absent = await this.absent(Array.from({ length: size }, (_, r) => arrivedKey(r)));
      throw new Error(`rendezvous: barrier ${JSON.stringify(name)} timed out after ${timeoutMs} ms with ${count} of ${size} ranks arrived${notArrived(absent ?? [])}`);
    }
  }

  /** Every rank's `value` under `name` (single-use), in rank order, once all `size` ranks have given theirs. */
  async allGather(name: string, size: number, value: string, timeoutMs = this.timeoutMs): Promise<Buffer[]> {
    const keys = Array.from({ length: size }, (_, r) => `${name}/${r}`);
    await this.set(keys[this.opts.rank]!, value);
    try {
      // One request for them all: rank 0 answers each rank once (dialling it back), not once per value.
      return await this.getAll(keys, timeoutMs);
    } catch (err) {
      if (this.failure) throw err;
      const absent = await this.absent(keys);
      throw new Error(`rendezvous: exchange ${JSON.stringify(name)} timed out after ${timeoutMs} ms${notArrived(absent ?? [])}`);
    }
  }

  /** The indices of `keys` that do not exist (now), or undefined when the store cannot say (it is gone). */
  async absent(keys: string[]): Promise<number[] | undefined> {
    // A missing key is answered with the store's timeout; any other failure is the store's own.
    const seen = await Promise.all(keys.map((k, i) => this.get(k, 0).then(() => -1, (e: Error) => (e.message.startsWith("rendezvous: timed out") ? i : -2))));
    return seen.includes(-2) ? undefined : seen.filter((i) => i >= 0);
  }

  close(): void {
    this.fail(new Error(`rendezvous: connection to ${this.address} closed`));
  }

  private request(msg: Request): Promise<Reply> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      const pending: Pending = { resolve, reject, settled: false };
      if (msg.type === "get" || msg.type === "wait" || msg.type === "getall") {
        pending.id = msg.id;
        const keys = msg.type === "get" ? [msg.key] : msg.keys;
        // The server enforces the timeout; this guard covers answers that never came back.
        pending.timer = setTimeout(() => this.settle(pending, new Error(timeoutMessage(keys, msg.timeoutMs))), Math.min(msg.timeoutMs + CLIENT_GUARD_MS, MAX_TIMER_MS)).unref();
        this.waiting.set(msg.id, pending);
        this.inbox.ref();
      }
      this.queue.push(pending);
      void this.send(encodeMessage(msg));
    });
  }

  /** Writes on the link, dialling it first when there is none. */
  private async send(frame: Buffer): Promise<void> {
    try {
      (await (this.link ??= this.openLink())).write(frame);
    } catch (err) {
      this.fail(err as Error);
    }
  }

  private async openLink(): Promise<net.Socket> {
    const { socket, reader } = await dial(this.opts, this.address, Date.now() + this.timeoutMs, { error: () => this.rankZeroLeft(), refusedIsFinal: true });
    return this.attach(socket, reader);
  }

  /** Takes replies from `socket`, the link from now on. */
  private attach(socket: net.Socket, reader: FrameReader): net.Socket {
    // The server is authenticated now; values it returns are bounded by what ranks stored.
    reader.maxFrameBytes = U32_MAX;
    socket.on("data", (chunk: Buffer) => {
      reader.push(chunk);
      try {
        for (let payload = reader.next(); payload !== undefined; payload = reader.next()) this.onReply(decodeMessage(payload));
      } catch {
        this.fail(unexpectedReply(this.address));
      }
    });
    socket.on("error", () => {}); // reported through "close"
    // Rank 0 serves the store (rendezvous.ts): the connection going while requests wait on it is rank 0
    // leaving, which is what a rank that was still talking to it has to report.
    socket.on("close", () => {
      if (this.queue.length > 0) this.fail(this.rankZeroLeft());
    });
    return socket;
  }

  private onReply(msg: Message): void {
    const pending = this.queue.shift();
    if (!pending) throw new ProtocolError("reply without a request");
    if (this.queue.length === 0) this.idle();
    if (msg.type === "parked") return this.watchStore();
    if (!isReply(msg)) throw new ProtocolError(`unexpected ${msg.type} reply`);
    this.settle(pending, msg);
  }

  /** Nothing is unanswered on the link: it closes, unless a request comes before this turn of the loop ends. */
  private idle(): void {
    const link = this.link;
    setImmediate(() => {
      if (this.link !== link || this.queue.length > 0) return;
      this.link = undefined;
      void link?.then((socket) => socket.destroy(), () => {});
      this.watchStore();
    });
  }

  private settle(pending: Pending, outcome: Reply | Error): void {
    if (pending.settled) return;
    pending.settled = true;
    clearTimeout(pending.timer);
    if (pending.id !== undefined) this.waiting.delete(pending.id);
    if (this.waiting.size === 0) this.inbox.unref();
    if (outcome instanceof Error) pending.reject(outcome);
    else if (outcome.type === "error") pending.reject(new Error(outcome.message));
    else pending.resolve(outcome);
  }

  /** Answers the server dials back with: its HELLO (proving this job's token) first, then ANSWER frames. */
  private takeAnswers(socket: net.Socket): void {
    const reader = new FrameReader(MAX_HELLO_FRAME_BYTES);
    const nonce = randomBytes(NONCE_BYTES);
    let trusted = false;
    this.unproven.add(socket);
    socket.on("error", () => {});
    socket.on("close", () => this.unproven.delete(socket));
    socket.write(encodeMessage({ type: "challenge", nonce }));
    socket.on("data", (chunk: Buffer) => {
      reader.push(chunk);
      try {
        for (let payload = reader.next(); payload !== undefined; payload = reader.next()) {
          const msg = decodeMessage(payload);
          if (!trusted) {
            trusted = msg.type === "hello" && macMatches(msg.mac, handshakeMac(this.opts.token, "hello", nonce, 0, 0));
            if (!trusted) return void socket.destroy();
            this.unproven.delete(socket);
            reader.maxFrameBytes = U32_MAX;
          } else if (msg.type === "answer") {
            const pending = this.waiting.get(msg.id);
            const reply = decodeMessage(msg.reply);
            if (pending && isReply(reply)) this.settle(pending, reply);
            // Taken (or already settled by an earlier copy): the courier counts it delivered only now.
            socket.write(encodeMessage({ type: "ok" }));
          }
        }
      } catch {
        socket.destroy();
      }
    });
  }

  /** While requests are parked and no link is open, checks each second that rank 0 still listens. */
  private watchStore(): void {
    if (this.probe || this.failure) return;
    this.probe = setInterval(() => {
      if (this.waiting.size === 0 || this.failure) {
        clearInterval(this.probe);
        this.probe = undefined;
        return;
      }
      if (this.link) return;
      const knock = net.createConnection({ host: this.opts.host, port: this.opts.port });
      knock.on("connect", () => knock.destroy());
      knock.on("error", (err: NodeJS.ErrnoException) => {
        if (err.code === "ECONNREFUSED") this.fail(this.rankZeroLeft());
      });
    }, PROBE_MS).unref();
  }

  private rankZeroLeft(): Error {
    return new Error(`rendezvous: connection to ${this.address} lost: rank 0, which serves the store, has left`);
  }

  private expect<T extends Reply["type"]>(msg: Reply, type: T): Extract<Reply, { type: T }> {
    if (msg.type !== type) {
      const err = unexpectedReply(this.address);
      this.fail(err);
      throw err;
    }
    return msg as Extract<Reply, { type: T }>;
  }

  private fail(err: Error): void {
    if (this.failure) return;
    this.failure = err;
    clearInterval(this.probe);
    void this.link?.then((socket) => socket.destroy(), () => {});
    this.inbox.close();
    this.unproven.closeAll("the rank left the store");
    for (const pending of [...this.queue.splice(0), ...this.waiting.values()]) this.settle(pending, err);
  }
}
