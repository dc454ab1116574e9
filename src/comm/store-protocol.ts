// Wire format of the rendezvous store, shared by server and client.
//
// frame   = u32be payloadLength, payload
// payload = u8 type, fields...
// string  = u32be byteLength, UTF-8 bytes;  bytes = u32be byteLength, raw bytes
//
// A client holds a connection only while it has requests in flight. A GET, WAIT or GETALL whose keys are
// not there yet is answered PARKED at once, and its real answer comes later on a connection the server
// dials to the port the client named in its HELLO (the server's own HELLO first, then ANSWER frames, each of
// which the client's inbox acknowledges with an OK; unacknowledged answers are dialled again): rank 0 holds no
// connection per waiting rank, as NCCL's bootstrap root holds none.
//
// Every connection opens with a challenge-response (DESIGN.md, "Security"): the side that accepts sends a
// CHALLENGE (a fresh nonce), the side that dialled answers with a HELLO carrying an HMAC-SHA-256 under the
// job token of that nonce, its rank and reply port, and its own nonce; the server answers a good HELLO with
// a WELCOME whose HMAC covers the client's nonce, so each side knows the other holds the token and the token
// never travels.
//
// Everything here is pure (no sockets) so malformed input can be tested directly.

import { createHmac, timingSafeEqual } from "node:crypto";

export const DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024;

/** Until a peer has proved it holds the job token it may send no more than a HELLO's few bytes. */
export const MAX_HELLO_FRAME_BYTES = 256;

/** Bytes of a handshake nonce, and of its HMAC-SHA-256. */
export const NONCE_BYTES = 32;

const HEADER_BYTES = 4;
const I64_MIN = -(2n ** 63n);
const I64_MAX = 2n ** 63n - 1n;

export const MsgType = {
  Hello: 1,
  Set: 2,
  Get: 3,
  Add: 4,
  Wait: 5,
  GetAll: 6,
  Challenge: 7,
  Ok: 0x80,
  Value: 0x81,
  Error: 0x82,
  Parked: 0x83,
  Answer: 0x84,
  Values: 0x85,
  Welcome: 0x86,
} as const;

export type Message =
  /** From the side that accepted a connection, first: the nonce the other side's HELLO must cover. */
  | { type: "challenge"; nonce: Buffer }
  /**
   * `replyPort`: where the client takes parked answers (0 from the server, which takes none); `mac`:
   * handshakeMac("hello") of the challenge's nonce; `nonce`: what the server's WELCOME must cover.
   */
  | { type: "hello"; rank: number; replyPort: number; nonce: Buffer; mac: Buffer }
  /** The server's answer to a good HELLO: handshakeMac("welcome") of the HELLO's nonce. */
  | { type: "welcome"; mac: Buffer }
  | { type: "set"; key: string; value: Buffer }
  /** `id`: the client's number for the request, which a parked answer carries back. */
  | { type: "get"; id: number; key: string; timeoutMs: number }
  | { type: "add"; key: string; delta: bigint }
  | { type: "wait"; id: number; keys: string[]; timeoutMs: number }
  /** Every key's value, in order, once all exist: an all-gather's one request. */
  | { type: "getall"; id: number; keys: string[]; timeoutMs: number }
  | { type: "ok" }
  | { type: "value"; value: Buffer }
  | { type: "values"; values: Buffer[] }
  | { type: "error"; message: string }
  | { type: "parked" }
  /** `reply`: the payload of the OK, VALUE or ERROR that answers request `id`. */
  | { type: "answer"; id: number; reply: Buffer };

export type Request = Extract<Message, { type: "set" | "get" | "add" | "wait" | "getall" }>;
export type Reply = Extract<Message, { type: "ok" | "value" | "values" | "error" }>;

export function isReply(msg: Message): msg is Reply {
  return msg.type === "ok" || msg.type === "value" || msg.type === "values" || msg.type === "error";
}

export class ProtocolError extends Error {}

/** The one wording of a GET/WAIT timeout, used by the server's reply and the client's own guard. */
export function timeoutMessage(keys: readonly string[], timeoutMs: number): string {
  const what = keys.length === 1 ? "key" : "keys";
  const names = keys.map((k) => JSON.stringify(k)).join(", ");
  return `rendezvous: timed out after ${timeoutMs} ms waiting for ${what} ${names}`;
}

/**
 * What a side of the handshake proves: HMAC-SHA-256 under the job token of its role, the other side's nonce,
 * and the rank and reply port the HELLO claims, so that a proof is good for one connection and one claim.
 */
export function handshakeMac(token: string, role: "hello" | "welcome", nonce: Buffer, rank: number, replyPort: number): Buffer {
  const claim = Buffer.allocUnsafe(8);
  claim.writeUInt32BE(rank);
  claim.writeUInt32BE(replyPort, 4);
  return createHmac("sha256", token).update(`spmd-runner store ${role}\0`).update(nonce).update(claim).digest();
}

/** Whether `mac` is the one expected, in constant time. */
export function macMatches(mac: Buffer, expected: Buffer): boolean {
  return mac.length === expected.length && timingSafeEqual(mac, expected);
}

/** host:port, with IPv6 literals bracketed so the port stays unambiguous. */
export function formatAddress(host: string, port: number): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}

class Writer {
  private readonly parts: Buffer[] = [];

  u8(v: number): this {
    this.parts.push(Buffer.of(v));
    return this;
  }

  u32(v: number): this {
    const b = Buffer.allocUnsafe(4);
    b.writeUInt32BE(v);
    this.parts.push(b);
    return this;
  }

  i64(v: bigint): this {
    const b = Buffer.allocUnsafe(8);
    b.writeBigInt64BE(v);
    this.parts.push(b);
    return this;
  }

  bytes(v: Uint8Array): this {
    this.u32(v.byteLength);
    this.parts.push(Buffer.from(v.buffer, v.byteOffset, v.byteLength));
    return this;
  }

  str(v: string): this {
    return this.bytes(Buffer.from(v, "utf8"));
  }

  frame(): Buffer {
    const payload = Buffer.concat(this.parts);
    const header = Buffer.allocUnsafe(HEADER_BYTES);
    header.writeUInt32BE(payload.length);
    return Buffer.concat([header, payload]);
  }
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

class Reader {
  private pos = 0;

  constructor(private readonly buf: Buffer) {}

  private need(n: number, what: string): void {
    if (this.buf.length - this.pos < n) throw new ProtocolError(`truncated ${what}`);
  }

  u8(what: string): number {
    this.need(1, what);
    return this.buf.readUInt8(this.pos++);
  }

  u32(what: string): number {
    this.need(4, what);
    const v = this.buf.readUInt32BE(this.pos);
    this.pos += 4;
    return v;
  }

  i64(what: string): bigint {
    this.need(8, what);
    const v = this.buf.readBigInt64BE(this.pos);
    this.pos += 8;
    return v;
  }

  bytes(what: string): Buffer {
    const n = this.u32(`${what} length`);
    this.need(n, what);
    // A copy, so a stored value does not pin the whole receive buffer.
    const v = Buffer.from(this.buf.subarray(this.pos, this.pos + n));
    this.pos += n;
    return v;
  }

  str(what: string): string {
    const raw = this.bytes(what);
    try {
      return utf8.decode(raw);
    } catch {
      throw new ProtocolError(`${what} is not valid UTF-8`);
    }
  }

  /** A count, then that many items; the count is checked first, so a forged one cannot make us allocate. */
  list<T>(what: string, item: () => T): T[] {
    const count = this.u32(`${what} count`);
    if (count > Math.floor((this.buf.length - this.pos) / 4)) throw new ProtocolError(`truncated ${what} list (${count} announced)`);
    return Array.from({ length: count }, item);
  }

  end(): void {
    if (this.pos !== this.buf.length) {
      throw new ProtocolError(`${this.buf.length - this.pos} trailing bytes`);
    }
  }
}

/** The complete frame (length header included) for one message. */
export function encodeMessage(msg: Message): Buffer {
  const w = new Writer();
  switch (msg.type) {
    case "challenge":
      return w.u8(MsgType.Challenge).bytes(msg.nonce).frame();
    case "hello":
      return w.u8(MsgType.Hello).u32(msg.rank).u32(msg.replyPort).bytes(msg.nonce).bytes(msg.mac).frame();
    case "welcome":
      return w.u8(MsgType.Welcome).bytes(msg.mac).frame();
    case "set":
      return w.u8(MsgType.Set).str(msg.key).bytes(msg.value).frame();
    case "get":
      return w.u8(MsgType.Get).u32(msg.id).str(msg.key).u32(msg.timeoutMs).frame();
    case "add":
      return w.u8(MsgType.Add).str(msg.key).i64(msg.delta).frame();
    case "wait":
    case "getall":
      w.u8(msg.type === "wait" ? MsgType.Wait : MsgType.GetAll).u32(msg.id).u32(msg.keys.length);
      for (const key of msg.keys) w.str(key);
      return w.u32(msg.timeoutMs).frame();
    case "ok":
      return w.u8(MsgType.Ok).frame();
    case "value":
      return w.u8(MsgType.Value).bytes(msg.value).frame();
    case "values":
      w.u8(MsgType.Values).u32(msg.values.length);
      for (const v of msg.values) w.bytes(v);
      return w.frame();
    case "error":
      return w.u8(MsgType.Error).str(msg.message).frame();
    case "parked":
      return w.u8(MsgType.Parked).frame();
    case "answer":
      return w.u8(MsgType.Answer).u32(msg.id).bytes(msg.reply).frame();
  }
}

/** A message without its frame's length header: what an ANSWER carries. */
export function payloadOf(msg: Message): Buffer {
  return encodeMessage(msg).subarray(HEADER_BYTES);
}

/** Decodes one frame's payload; throws ProtocolError on anything but an exact, well-formed message. */
export function decodeMessage(payload: Uint8Array): Message {
  const r = new Reader(Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength));
  const type = r.u8("message type");
  let msg: Message;
  switch (type) {
    case MsgType.Challenge:
      msg = { type: "challenge", nonce: r.bytes("nonce") };
      break;
    case MsgType.Hello:
      msg = { type: "hello", rank: r.u32("rank"), replyPort: r.u32("reply port"), nonce: r.bytes("nonce"), mac: r.bytes("mac") };
      break;
    case MsgType.Welcome:
      msg = { type: "welcome", mac: r.bytes("mac") };
      break;
    case MsgType.Set:
      msg = { type: "set", key: r.str("key"), value: r.bytes("value") };
      break;
    case MsgType.Get:
      msg = { type: "get", id: r.u32("id"), key: r.str("key"), timeoutMs: r.u32("timeout") };
      break;
    case MsgType.Add:
      msg = { type: "add", key: r.str("key"), delta: r.i64("delta") };
      break;
    case MsgType.Wait:
    case MsgType.GetAll: {
      const id = r.u32("id");
      const keys = r.list("key", () => r.str("key"));
      msg = { type: type === MsgType.Wait ? "wait" : "getall", id, keys, timeoutMs: r.u32("timeout") };
      break;
    }
    case MsgType.Ok:
      msg = { type: "ok" };
      break;
    case MsgType.Value:
      msg = { type: "value", value: r.bytes("value") };
      break;
    case MsgType.Values:
      msg = { type: "values", values: r.list("value", () => r.bytes("value")) };
      break;
    case MsgType.Error:
      msg = { type: "error", message: r.str("message") };
      break;
    case MsgType.Parked:
      msg = { type: "parked" };
      break;
    case MsgType.Answer:
      msg = { type: "answer", id: r.u32("id"), reply: r.bytes("reply") };
      break;
    default:
      throw new ProtocolError(`unknown message type ${type}`);
  }
  r.end();
  return msg;
}

/** Parses an ADD counter's stored decimal text; undefined if it is not a 64-bit integer. */
export function parseCounter(value: Buffer): bigint | undefined {
  const text = value.toString("latin1");
  if (!/^-?\d{1,19}$/.test(text)) return undefined;
  const n = BigInt(text);
  return fitsI64(n) ? n : undefined;
}

export function fitsI64(n: bigint): boolean {
  return n >= I64_MIN && n <= I64_MAX;
}

/**
 * Cuts a byte stream into frame payloads. Chunks are kept as a list and joined once
 * per complete frame, so a large value arriving in many chunks is copied once.
 */
export class FrameReader {
  private chunks: Buffer[] = [];
  private buffered = 0;

  /** May be raised between frames (the server does so once a peer is authenticated). */
  constructor(public maxFrameBytes: number) {}

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
  }

  /** The next complete payload, or undefined until more bytes arrive; throws on an oversize length. */
  next(): Buffer | undefined {
    if (this.buffered < HEADER_BYTES) return undefined;
    if (this.chunks[0].length < HEADER_BYTES) this.join();
    const length = this.chunks[0].readUInt32BE(0);
    if (length > this.maxFrameBytes) {
      throw new ProtocolError(`frame of ${length} bytes exceeds the ${this.maxFrameBytes}-byte limit`);
    }
    const total = HEADER_BYTES + length;
    if (this.buffered < total) return undefined;
    if (this.chunks[0].length < total) this.join();
    const head = this.chunks[0];
    const payload = head.subarray(HEADER_BYTES, total);
    if (head.length === total) this.chunks.shift();
    else this.chunks[0] = head.subarray(total);
    this.buffered -= total;
    return payload;
  }

  private join(): void {
    this.chunks = [Buffer.concat(this.chunks, this.buffered)];
  }
}
