// Rendezvous key-value store (in the manner of torch's TCPStore): rank 0 hosts a
// StoreServer at MASTER_ADDR:MASTER_PORT, every rank talks to it through a StoreClient.
// Peers must present the job token before they are served anything.

import { createHash, timingSafeEqual } from "node:crypto";
import net from "node:net";
import {
  DEFAULT_MAX_FRAME_BYTES,
  FrameReader,
  MAX_HELLO_FRAME_BYTES,
  ProtocolError,
  decodeMessage,
  encodeMessage,
  fitsI64,
  formatAddress,
  parseCounter,
  timeoutMessage,
  type Message,
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

interface Connection {
  readonly socket: net.Socket;
  readonly peer: string;
  authenticated: boolean;
  rank: number;
  /** Set once the connection is being torn down: nothing more is read or answered. */
  done: boolean;
  /** Replies in request order; a slot without a frame is a request still waiting. */
  readonly replies: Array<{ frame?: Buffer }>;
  readonly waiters: Set<Waiter>;
}

interface Waiter {
  readonly conn: Connection;
  readonly missing: Set<string>;
  readonly timer: NodeJS.Timeout;
  readonly onReady: () => void;
}

function digest(token: string): Buffer {
  return createHash("sha256").update(token, "utf8").digest();
}

export class StoreServer {
  /** The address listened on: as asked, or "::" / "0.0.0.0" for every interface. */
  readonly host: string;
  readonly port: number;
  private readonly values = new Map<string, Buffer>();
  private readonly waitersByKey = new Map<string, Set<Waiter>>();
  private readonly connections = new Set<Connection>();
  private readonly tokenDigest: Buffer;

  private constructor(
    private readonly server: net.Server,
    token: string,
    private readonly maxFrameBytes: number,
  ) {
    ({ address: this.host, port: this.port } = server.address() as net.AddressInfo);
    this.tokenDigest = digest(token);
    server.on("connection", (socket) => this.accept(socket));
    // Failed accepts (e.g. EMFILE) must not take rank 0 down; the peer retries.
    server.on("error", () => {});
  }

  /** Without `host`, on every interface (IPv6 and IPv4 where the host has IPv6). */
  static listen(opts: { host?: string; port: number; token: string; maxFrameBytes?: number }): Promise<StoreServer> {
    const server = net.createServer();
    return new Promise((resolve, reject) => {
      server.once("error", (err: NodeJS.ErrnoException) => {
        const why = err.code === "EADDRINUSE" ? "address in use" : err.message;
        reject(new Error(`rendezvous: cannot listen on ${formatAddress(opts.host ?? "*", opts.port)}: ${why}`));
      });
      server.listen({ host: opts.host, port: opts.port }, () => {
        server.removeAllListeners("error");
        resolve(new StoreServer(server, opts.token, opts.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES));
      });
    });
  }

  close(): Promise<void> {
    for (const conn of this.connections) conn.socket.destroy();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private accept(socket: net.Socket): void {
    const conn: Connection = {
      socket,
      peer: formatAddress(socket.remoteAddress ?? "unknown", socket.remotePort ?? 0),
      authenticated: false,
      rank: -1,
      done: false,
      replies: [],
      waiters: new Set(),
    };
    this.connections.add(conn);
    const reader = new FrameReader(Math.min(MAX_HELLO_FRAME_BYTES, this.maxFrameBytes));
    socket.setNoDelay(true);
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
        this.reject(
          conn,
          conn.authenticated
            ? `rendezvous: malformed frame from rank ${conn.rank} at ${conn.peer}: ${detail}`
            : `rendezvous: ${WRONG_TOKEN} from ${conn.peer}`,
        );
      }
    });
  }

  private handle(conn: Connection, msg: Message): void {
    if (!conn.authenticated) {
      if (msg.type !== "hello" || !timingSafeEqual(digest(msg.token), this.tokenDigest)) {
        throw new ProtocolError(WRONG_TOKEN);
      }
      conn.authenticated = true;
      conn.rank = msg.rank;
      this.slot(conn)(encodeMessage({ type: "ok" }));
      return;
    }
    const reply = this.slot(conn);
    switch (msg.type) {
      case "set":
        this.store(msg.key, msg.value);
        reply(encodeMessage({ type: "ok" }));
        return;
      case "get":
        this.whenPresent(conn, [msg.key], msg.timeoutMs, reply, () =>
          encodeMessage({ type: "value", value: this.values.get(msg.key)! }),
        );
        return;
      case "wait":
        this.whenPresent(conn, msg.keys, msg.timeoutMs, reply, () => encodeMessage({ type: "ok" }));
        return;
      case "add":
        reply(this.add(msg.key, msg.delta));
        return;
      default:
        throw new ProtocolError(`unexpected ${msg.type} message`);
    }
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

  private whenPresent(
    conn: Connection,
    keys: string[],
    timeoutMs: number,
    reply: (frame: Buffer) => void,
    answer: () => Buffer,
  ): void {
    const missing = new Set(keys.filter((k) => !this.values.has(k)));
    if (missing.size === 0) return reply(answer());
    const timedOut = () => encodeMessage({ type: "error", message: timeoutMessage(keys, timeoutMs) });
    if (timeoutMs === 0) return reply(timedOut());
    const waiter: Waiter = {
      conn,
      missing,
      onReady: () => reply(answer()),
      timer: setTimeout(() => {
        this.unregister(waiter);
        reply(timedOut());
      }, Math.min(timeoutMs, MAX_TIMER_MS)).unref(),
    };
    conn.waiters.add(waiter);
    for (const key of missing) {
      let set = this.waitersByKey.get(key);
      if (!set) this.waitersByKey.set(key, (set = new Set()));
      set.add(waiter);
    }
  }

  private unregister(w: Waiter): void {
    clearTimeout(w.timer);
    w.conn.waiters.delete(w);
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
    for (const w of conn.waiters) this.unregister(w);
    this.connections.delete(conn);
  }
}

// ---------------------------------------------------------------- client

interface Pending {
  resolve(msg: Message): void;
  reject(err: Error): void;
  timer?: NodeJS.Timeout;
  /** Already rejected by the client's own timer; its late reply is dropped. */
  abandoned: boolean;
}

type Handshake =
  | { kind: "ok"; socket: net.Socket; reader: FrameReader }
  | { kind: "retry" }
  | { kind: "fatal"; error: Error };

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
function handshake(
  opts: { host: string; port: number; token: string; rank: number },
  address: string,
  budgetMs: number,
): Promise<Handshake> {
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
    const onConnect = () => {
      socket.setNoDelay(true);
      socket.write(encodeMessage({ type: "hello", token: opts.token, rank: opts.rank }));
    };
    const onData = (chunk: Buffer) => {
      reader.push(chunk);
      let msg: Message;
      try {
        const payload = reader.next();
        if (payload === undefined) return;
        msg = decodeMessage(payload);
      } catch {
        return finish({ kind: "fatal", error: unexpectedReply(address) });
      }
      if (msg.type === "ok") return finish({ kind: "ok", socket, reader });
      if (msg.type !== "error") return finish({ kind: "fatal", error: unexpectedReply(address) });
      const why = msg.message.includes(WRONG_TOKEN)
        ? `${WRONG_TOKEN} (is another job using this port?)`
        : msg.message;
      finish({ kind: "fatal", error: new Error(`rendezvous at ${address} rejected this rank: ${why}`) });
    };
    const onError = (err: NodeJS.ErrnoException) => {
      if (RETRYABLE_CONNECT_ERRORS.has(err.code ?? "")) return finish({ kind: "retry" });
      finish({ kind: "fatal", error: new Error(`rendezvous: cannot connect to ${address}: ${err.message}`) });
    };
    // Closed without an answer: the server was starting up or shedding load.
    const onClose = () => finish({ kind: "retry" });
    socket.on("connect", onConnect).on("data", onData).on("error", onError).on("close", onClose);
  });
}

/** "; not arrived: rank 2, rank 5" (the first few of them), or "" when the store could not say. */
export function notArrived(ranks: number[]): string {
  if (ranks.length === 0) return "";
  const shown = ranks.slice(0, 8).map((r) => `rank ${r}`).join(", ");
  return `; not arrived: ${shown}${ranks.length > 8 ? ` and ${ranks.length - 8} more` : ""}`;
}

export class StoreClient {
  private readonly queue: Pending[] = [];
  private failure?: Error;

  private constructor(
    private readonly socket: net.Socket,
    reader: FrameReader,
    readonly address: string,
    private readonly timeoutMs: number,
    /** The rank this client speaks for: barriers note who arrived under it. */
    private readonly rank: number,
  ) {
    // The server is authenticated now; values it returns are bounded by what ranks stored.
    reader.maxFrameBytes = U32_MAX;
    socket.on("data", (chunk: Buffer) => {
      reader.push(chunk);
      try {
        for (let payload = reader.next(); payload !== undefined; payload = reader.next()) {
          this.onReply(decodeMessage(payload));
        }
      } catch {
        this.fail(unexpectedReply(address));
      }
    });
    socket.on("error", () => {}); // reported through "close"
    // Rank 0 serves the store (rendezvous.ts): its connection going is rank 0 leaving, which is what a rank
    // that was still talking to it has to report (rank 0 may have failed before this rank could).
    socket.on("close", () => this.fail(new Error(`rendezvous: connection to ${address} lost: rank 0, which serves the store, has left`)));
    // Held only while requests are outstanding, so an idle client never keeps the process alive.
    socket.unref();
  }

  static async connect(opts: { host: string; port: number; token: string; rank: number; timeoutMs: number }): Promise<StoreClient> {
    const address = formatAddress(opts.host, opts.port);
    const deadline = Date.now() + opts.timeoutMs;
    for (let delay = 50; ; delay = Math.min(2 * delay, 1000)) {
      const outcome = await handshake(opts, address, deadline - Date.now());
      if (outcome.kind === "ok") return new StoreClient(outcome.socket, outcome.reader, address, opts.timeoutMs, opts.rank);
      if (outcome.kind === "fatal") throw outcome.error;
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new Error(`rendezvous: could not reach ${address} within ${opts.timeoutMs / 1000} s (is rank 0 running?)`);
      }
      await sleep(Math.min(delay, left));
    }
  }

  async set(key: string, value: string | Uint8Array): Promise<void> {
    const buf = typeof value === "string" ? Buffer.from(value, "utf8") : Buffer.from(value);
    this.expect(await this.request({ type: "set", key, value: buf }), "ok");
  }

  /** Waits until the key exists, then returns its value. */
  async get(key: string, timeoutMs = this.timeoutMs): Promise<Buffer> {
    return this.expect(await this.request({ type: "get", key, timeoutMs: wireTimeout(timeoutMs) }), "value").value;
  }

  /** Adds to an integer counter (missing counts as 0) and returns the new value. */
  async add(key: string, delta: number): Promise<number> {
    if (!Number.isSafeInteger(delta)) throw new TypeError(`rendezvous: add delta must be a safe integer, got ${delta}`);
    const reply = this.expect(await this.request({ type: "add", key, delta: BigInt(delta) }), "value");
    return Number(reply.value.toString("latin1"));
  }

  async wait(keys: string[], timeoutMs = this.timeoutMs): Promise<void> {
    this.expect(await this.request({ type: "wait", keys, timeoutMs: wireTimeout(timeoutMs) }), "ok");
  }

  /** Returns once `size` callers have entered the barrier `name`; each name is single-use. */
  async barrier(name: string, size: number, timeoutMs = this.timeoutMs): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const countKey = `${name}/count`;
    const doneKey = `${name}/done`;
    const arrivedKey = (r: number) => `${name}/arrived/${r}`;
    await this.set(arrivedKey(this.rank), "");
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

  /** The indices of `keys` that do not exist (now), or undefined when the store cannot say (it is gone). */
  async absent(keys: string[]): Promise<number[] | undefined> {
    // A missing key is answered with the store's timeout; any other failure is the store's own.
    const seen = await Promise.all(keys.map((k, i) => this.get(k, 0).then(() => -1, (e: Error) => (e.message.startsWith("rendezvous: timed out") ? i : -2))));
    return seen.includes(-2) ? undefined : seen.filter((i) => i >= 0);
  }

  close(): void {
    this.fail(new Error(`rendezvous: connection to ${this.address} closed`));
  }

  private request(msg: Request): Promise<Message> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      const pending: Pending = { resolve, reject, abandoned: false };
      if (msg.type === "get" || msg.type === "wait") {
        const keys = msg.type === "get" ? [msg.key] : msg.keys;
        pending.timer = setTimeout(() => {
          pending.abandoned = true;
          reject(new Error(timeoutMessage(keys, msg.timeoutMs)));
        }, Math.min(msg.timeoutMs + CLIENT_GUARD_MS, MAX_TIMER_MS)).unref();
      }
      this.queue.push(pending);
      this.socket.ref();
      this.socket.write(encodeMessage(msg));
    });
  }

  private onReply(msg: Message): void {
    const pending = this.queue.shift();
    if (!pending) throw new ProtocolError("reply without a request");
    clearTimeout(pending.timer);
    if (this.queue.length === 0) this.socket.unref();
    if (pending.abandoned) return;
    if (msg.type === "error") pending.reject(new Error(msg.message));
    else pending.resolve(msg);
  }

  private expect<T extends Message["type"]>(msg: Message, type: T): Extract<Message, { type: T }> {
    if (msg.type !== type) {
      const err = unexpectedReply(this.address);
      this.fail(err);
      throw err;
    }
    return msg as Extract<Message, { type: T }>;
  }

  private fail(err: Error): void {
    if (this.failure) return;
    this.failure = err;
    this.socket.destroy();
    for (const pending of this.queue.splice(0)) {
      clearTimeout(pending.timer);
      if (!pending.abandoned) pending.reject(err);
    }
  }
}
