// Hostile input to the rendezvous store, property-based (fast-check): the pure frame decoder and frame
// reader on random, truncated and oversized bytes, and a live server fed garbage, wrong tokens and cut
// frames by raw peers. The decoder only ever returns a message or throws ProtocolError; the server
// survives every peer, a peer without the token never receives anything but one error frame, and an
// authenticated peer that sends garbage is cut off with an error. Bounded runs keep CI fast.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { StoreClient, StoreServer } from "../dist/comm/store.js";
import {
  FrameReader,
  MAX_HELLO_FRAME_BYTES,
  ProtocolError,
  decodeMessage,
  encodeMessage,
} from "../dist/comm/store-protocol.js";
import { framesOf, helloFor, rawExchange } from "./helpers/store.js";

const TOKEN = "0123456789abcdef0123456789abcdef";
const T = { timeout: 120_000 };

const text = fc.string({ maxLength: 24 });
const bytes = fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b));
const u32 = fc.nat({ max: 0xffff_ffff });
const message = fc.oneof(
  fc.record({ type: fc.constant("challenge"), nonce: bytes }),
  fc.record({ type: fc.constant("hello"), rank: u32, replyPort: u32, nonce: bytes, mac: bytes }),
  fc.record({ type: fc.constant("welcome"), mac: bytes }),
  fc.record({ type: fc.constant("set"), key: text, value: bytes }),
  fc.record({ type: fc.constant("get"), id: u32, key: text, timeoutMs: u32 }),
  fc.record({ type: fc.constant("add"), key: text, delta: fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }) }),
  fc.record({ type: fc.constant("wait"), id: u32, keys: fc.array(text, { maxLength: 4 }), timeoutMs: u32 }),
  fc.constant({ type: "ok" }),
  fc.record({ type: fc.constant("value"), value: bytes }),
  fc.record({ type: fc.constant("error"), message: text }),
  fc.record({ type: fc.constant("getall"), id: u32, keys: fc.array(text, { maxLength: 4 }), timeoutMs: u32 }),
  fc.record({ type: fc.constant("values"), values: fc.array(bytes, { maxLength: 4 }) }),
  fc.constant({ type: "parked" }),
  fc.record({ type: fc.constant("answer"), id: u32, reply: bytes }),
).map((m) => ({ ...m })); // plain objects, as decodeMessage builds them (fc.record's have no prototype)

/** A frame's payload damaged the ways a wire or an attacker would: cut, extended, bytes flipped, type changed. */
const damaged = fc.tuple(message, fc.nat(), fc.nat({ max: 255 }), fc.constantFrom("cut", "extend", "flip", "retype")).map(([m, at, byte, how]) => {
  const payload = Buffer.from(encodeMessage(m).subarray(4));
  const i = at % payload.length;
  if (how === "cut") return payload.subarray(0, i);
  if (how === "extend") return Buffer.concat([payload, Buffer.of(byte)]);
  if (how === "retype") return Buffer.concat([Buffer.of(byte), payload.subarray(1)]);
  payload[i] ^= byte || 1;
  return payload;
});

function decodesOrProtocolError(payload) {
  try {
    return decodeMessage(payload);
  } catch (err) {
    if (!(err instanceof ProtocolError)) throw err;
    return undefined;
  }
}

describe("store protocol, fuzzed", () => {
  test("every message round-trips through encode and decode", () => {
    fc.assert(fc.property(message, (m) => assert.deepEqual(decodeMessage(encodeMessage(m).subarray(4)), m)), { numRuns: 500 });
  });

  test("random and damaged payloads decode or throw ProtocolError, nothing else", () => {
    fc.assert(fc.property(fc.oneof(fc.uint8Array({ maxLength: 300 }), damaged), (p) => void decodesOrProtocolError(p)), { numRuns: 1000 });
  });

  test("FrameReader: any bytes in any chunks give back the frames sent, or refuse an oversize length", () => {
    const chunking = fc.array(fc.nat({ max: 40 }), { maxLength: 20 });
    fc.assert(
      fc.property(fc.array(message, { maxLength: 6 }), fc.uint8Array({ maxLength: 40 }), chunking, (msgs, tail, cuts) => {
        const stream = Buffer.concat([...msgs.map(encodeMessage), Buffer.from(tail)]);
        const reader = new FrameReader(MAX_HELLO_FRAME_BYTES);
        const got = [];
        let at = 0;
        for (const cut of [...cuts, stream.length]) {
          reader.push(stream.subarray(at, Math.min(stream.length, at + cut)));
          at = Math.min(stream.length, at + cut);
          try {
            for (let p = reader.next(); p !== undefined; p = reader.next()) got.push(p);
          } catch (err) {
            assert.ok(err instanceof ProtocolError && /exceeds the \d+-byte limit/.test(err.message), String(err));
            return; // the garbage tail announced an oversize frame; the server drops such a peer
          }
        }
        // Everything sent whole comes back whole, in order (a garbage tail may add a frame or leave a partial one).
        assert.ok(got.length >= msgs.length);
        msgs.forEach((m, i) => assert.deepEqual(decodeMessage(got[i]), m));
      }),
      { numRuns: 500 },
    );
  });
});

describe("store server, fuzzed over sockets", () => {
  async function withServer(body) {
    const server = await StoreServer.listen({ host: "127.0.0.1", port: 0, token: TOKEN });
    try {
      const client = await StoreClient.connect({ host: "127.0.0.1", port: server.port, token: TOKEN, rank: 0, timeoutMs: 5000 });
      await client.set("secret", "only for the job");
      await body(server.port);
      // The server survived whatever came before: a fresh client is served.
      const later = await StoreClient.connect({ host: "127.0.0.1", port: server.port, token: TOKEN, rank: 1, timeoutMs: 5000 });
      assert.equal((await later.get("secret", 1000)).toString(), "only for the job");
      later.close();
      client.close();
    } finally {
      await server.close();
    }
  }

  /** What a peer without the token may receive: nothing, or the one error frame that turns it away. */
  function assertTurnedAway(received) {
    if (received.length === 0) return;
    const frames = framesOf(received);
    assert.equal(frames.length, 1, JSON.stringify(frames));
    assert.equal(frames[0].type, "error");
    assert.match(frames[0].message, /^rendezvous: wrong job token from /);
  }

  const garbage = fc.oneof(
    fc.uint8Array({ minLength: 1, maxLength: 200 }).map((b) => Buffer.from(b)),
    // Well-formed requests before any hello: a stranger asking for the secret.
    fc.constantFrom({ type: "get", id: 1, key: "secret", timeoutMs: 0 }, { type: "set", key: "secret", value: Buffer.from("x") }).map(encodeMessage),
    // A hello proving another token, or a frame length past what an unauthenticated peer may send.
    fc.tuple(text, u32).map(([token, rank]) => helloFor(`x${token}`, Buffer.alloc(32), rank)),
    fc.integer({ min: MAX_HELLO_FRAME_BYTES + 1, max: 0xffff_ffff }).map((n) => Buffer.from([n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255])),
    damaged.map((p) => Buffer.concat([Buffer.from([0, 0, p.length >>> 8, p.length & 255]), p])),
  );

  test("peers without the token get nothing but one error frame, whatever they send; the server keeps serving", T, () =>
    withServer(async (port) => {
      const sends = fc.sample(fc.array(garbage, { minLength: 1, maxLength: 3 }), { numRuns: 150, seed: 7 });
      for (const chunks of sends) {
        // Half-closed after writing, so a peer that stopped mid-frame is answered by the connection closing.
        const received = await rawExchange(port, chunks, { endAfterWrite: true });
        assertTurnedAway(received);
        assert.ok(!received.includes(Buffer.from("only for the job")), "the secret never leaks");
      }
    }));

  test("an authenticated peer sending garbage gets an error and is cut off; the server keeps serving", T, () =>
    withServer(async (port) => {
      const frame = (p) => Buffer.concat([Buffer.from([0, 0, p.length >>> 8, p.length & 255]), p]);
      const bad = fc.oneof(
        // Random bytes may happen to be a valid request, which is then simply answered.
        fc.uint8Array({ minLength: 5, maxLength: 100 }).map((b) => ({ chunk: Buffer.from(b), surelyBad: false })),
        damaged.filter((p) => decodesOrProtocolError(p) === undefined).map((p) => ({ chunk: frame(p), surelyBad: true })),
        fc.constant({ chunk: Buffer.from([0xff, 0xff, 0xff, 0xff]), surelyBad: true }), // past the frame limit
        fc.constant({ chunk: encodeMessage({ type: "ok" }), surelyBad: true }), // a reply where a request belongs
      );
      for (const { chunk, surelyBad } of fc.sample(bad, { numRuns: 100, seed: 11 })) {
        const frames = framesOf(await rawExchange(port, (nonce) => [helloFor(TOKEN, nonce, 3), chunk], { endAfterWrite: true }));
        assert.equal(frames[0].type, "welcome", "the hello was accepted");
        const cutOff = frames.findIndex((f) => f.type === "error" && /^rendezvous: malformed frame from rank 3 /.test(f.message));
        if (surelyBad) assert.ok(cutOff > 0, JSON.stringify(frames));
        if (cutOff > 0) assert.equal(cutOff, frames.length - 1, "nothing follows the error that cut the peer off");
      }
    }));
});
