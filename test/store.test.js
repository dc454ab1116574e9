import { test, describe } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { spawn } from "node:child_process";
import { StoreClient, StoreServer } from "../dist/comm/store.js";
import { rendezvous } from "../dist/comm/rendezvous.js";
import {
  FrameReader,
  ProtocolError,
  decodeMessage,
  encodeMessage,
} from "../dist/comm/store-protocol.js";
import { framesOf, helloFor, rawExchange } from "./helpers/store.js";

const TOKEN = "0123456789abcdef0123456789abcdef";
const T = { timeout: 20_000 };

async function withStore(fn, { host = "127.0.0.1", maxFrameBytes } = {}) {
  const server = await StoreServer.listen({ host, port: 0, token: TOKEN, maxFrameBytes });
  const clients = [];
  const connect = async (rank = 0, extra = {}) => {
    const c = await StoreClient.connect({ host, port: server.port, token: TOKEN, rank, timeoutMs: 5000, ...extra });
    clients.push(c);
    return c;
  };
  try {
    await fn({ server, connect });
  } finally {
    for (const c of clients) c.close();
    await server.close();
  }
}

/** A port with nothing listening on it (for a moment). */
function unusedPort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer().once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function assertOnlyError(bytes, pattern) {
  const frames = framesOf(bytes);
  assert.equal(frames.length, 1, `expected one ERROR frame, got ${JSON.stringify(frames)}`);
  assert.equal(frames[0].type, "error");
  assert.match(frames[0].message, pattern);
}

describe("store protocol codec", () => {
  test("round-trips every message type", () => {
    const messages = [
      { type: "challenge", nonce: Buffer.alloc(32, 1) },
      { type: "hello", rank: 7, replyPort: 41234, nonce: Buffer.alloc(32, 2), mac: Buffer.alloc(32, 3) },
      { type: "welcome", mac: Buffer.alloc(32, 4) },
      { type: "set", key: "k", value: Buffer.from([0, 1, 255]) },
      { type: "get", id: 3, key: "k", timeoutMs: 1234 },
      { type: "add", key: "n", delta: -5n },
      { type: "wait", id: 0xffffffff, keys: ["a", "b", ""], timeoutMs: 0 },
      { type: "ok" },
      { type: "value", value: Buffer.alloc(0) },
      { type: "error", message: "nope" },
      { type: "getall", id: 4, keys: ["x", "y"], timeoutMs: 99 },
      { type: "values", values: [Buffer.from("1"), Buffer.alloc(0)] },
      { type: "parked" },
      { type: "answer", id: 9, reply: encodeMessage({ type: "value", value: Buffer.from("v") }).subarray(4) },
    ];
    for (const msg of messages) {
      const frame = encodeMessage(msg);
      assert.equal(frame.readUInt32BE(0), frame.length - 4);
      assert.deepEqual(decodeMessage(frame.subarray(4)), msg);
    }
  });

  test("rejects truncated and garbage payloads with ProtocolError", () => {
    const hello = helloFor("abc", Buffer.alloc(32), 1).subarray(4);
    for (let n = 0; n < hello.length; n++) {
      assert.throws(() => decodeMessage(hello.subarray(0, n)), ProtocolError, `prefix of ${n} bytes`);
    }
    assert.throws(() => decodeMessage(Buffer.concat([hello, Buffer.of(0)])), /trailing/);
    assert.throws(() => decodeMessage(Buffer.of(0x42)), /unknown message type 66/);
    // A key count far beyond what the payload could hold.
    assert.throws(() => decodeMessage(Buffer.of(5, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff)), /truncated key list/);
    // Invalid UTF-8 in a string.
    assert.throws(() => decodeMessage(Buffer.of(3, 0, 0, 0, 7, 0, 0, 0, 1, 0xff, 0, 0, 0, 0)), /not valid UTF-8/);
  });

  test("FrameReader reassembles frames split at every byte and refuses oversize lengths", () => {
    const frames = [
      encodeMessage({ type: "set", key: "x", value: Buffer.alloc(300, 7) }),
      encodeMessage({ type: "ok" }),
    ];
    const reader = new FrameReader(1024);
    const got = [];
    for (const byte of Buffer.concat(frames)) {
      reader.push(Buffer.of(byte));
      for (let p = reader.next(); p !== undefined; p = reader.next()) got.push(decodeMessage(p));
    }
    assert.deepEqual(got.map((m) => m.type), ["set", "ok"]);
    const small = new FrameReader(16);
    small.push(Buffer.of(0, 0, 0, 17));
    assert.throws(() => small.next(), /17 bytes exceeds the 16-byte limit/);
  });
});

describe("store server and client", () => {
  test("set then get, strings and bytes", T, () =>
    withStore(async ({ connect }) => {
      const c = await connect();
      await c.set("greeting", "héllo");
      await c.set("bytes", Uint8Array.of(0, 1, 2, 255));
      assert.equal((await c.get("greeting")).toString(), "héllo");
      assert.deepEqual([...(await c.get("bytes"))], [0, 1, 2, 255]);
      await c.set("greeting", "again");
      assert.equal((await c.get("greeting")).toString(), "again");
    }));

  test("get waits for a later set from another client", T, () =>
    withStore(async ({ connect }) => {
      const [a, b] = await Promise.all([connect(0), connect(1)]);
      const pending = a.get("late");
      await new Promise((r) => setTimeout(r, 50));
      await b.set("late", "here");
      assert.equal((await pending).toString(), "here");
    }));

  test("requests on one connection are pipelined: a get does not block a later set", T, () =>
    withStore(async ({ connect }) => {
      const c = await connect();
      const [value] = await Promise.all([c.get("self"), c.set("self", "v"), c.add("n", 2)]);
      assert.equal(value.toString(), "v");
    }));

  test("add from many clients is exact, and get sees the decimal value", T, () =>
    withStore(async ({ connect }) => {
      const clients = await Promise.all(Array.from({ length: 8 }, (_, r) => connect(r)));
      await Promise.all(clients.flatMap((c) => Array.from({ length: 25 }, () => c.add("counter", 1))));
      assert.equal((await clients[0].get("counter")).toString(), "200");
      assert.equal(await clients[1].add("counter", -201), -1);
      await clients[0].set("text", "abc");
      await assert.rejects(clients[0].add("text", 1), /cannot add to key "text": its value is not an integer/);
      // The connection stays usable after a per-request error.
      assert.equal(await clients[0].add("counter", 1), 0);
    }));

  test("wait returns once every key exists", T, () =>
    withStore(async ({ connect }) => {
      const [a, b] = await Promise.all([connect(0), connect(1)]);
      let done = false;
      const waiting = a.wait(["x", "y"]).then(() => (done = true));
      await b.set("x", "1");
      await new Promise((r) => setTimeout(r, 50));
      assert.equal(done, false);
      await b.set("y", "1");
      await waiting;
      await a.wait([]);
    }));

  test("barrier releases 5 clients only when all have arrived", T, () =>
    withStore(async ({ connect }) => {
      const clients = await Promise.all(Array.from({ length: 5 }, (_, r) => connect(r)));
      const released = [];
      const first = clients.slice(0, 4).map((c, r) => c.barrier("b1", 5).then(() => released.push(r)));
      await new Promise((r) => setTimeout(r, 100));
      assert.deepEqual(released, []);
      await Promise.all([...first, clients[4].barrier("b1", 5)]);
      assert.equal(released.length, 4);
    }));

  test("100 clients through a barrier and an all-gather at once: rank 0 serves a few connections at a time, and every value arrives", T, () =>
    withStore(async ({ server, connect }) => {
      const W = 100;
      let open = 0, most = 0;
      server["server"].on("connection", (socket) => {
        most = Math.max(most, ++open);
        socket.on("close", () => open--);
      });
      const clients = await Promise.all(Array.from({ length: W }, (_, r) => connect(r)));
      await Promise.all(clients.map((c) => c.barrier("all", W)));
      const seen = await Promise.all(
        clients.map(async (c, r) => {
          await c.set(`v/${r}`, String(r * r));
          return Promise.all(Array.from({ length: W }, (_, p) => c.get(`v/${p}`).then(String)));
        }),
      );
      for (const got of seen) assert.deepEqual(got, Array.from({ length: W }, (_, p) => String(p * p)));
      // Waiting clients hold no connection (their answers are dialled back to them): with one held per
      // waiting client, the barrier alone would have kept about 100 open.
      assert.ok(most <= 16, `rank 0 served ${most} connections at once`);
    }));

  test("a parked request takes its answer only from the store: a stranger's forged answer is dropped", T, () =>
    withStore(async ({ connect }) => {
      const c = await connect(1);
      const pending = c.get("later", 5000);
      const inbox = c["inbox"].address().port;
      const forged = Buffer.concat([
        helloFor("not the job's", Buffer.alloc(32), 0),
        encodeMessage({ type: "answer", id: 1, reply: encodeMessage({ type: "value", value: Buffer.from("forged") }).subarray(4) }),
      ]);
      // After the inbox's challenge, as the store would send them; the HELLO proves another token.
      await rawExchange(inbox, [forged]);
      const other = await connect(2);
      await other.set("later", "real");
      assert.equal((await pending).toString(), "real");
    }));

  test("an answer whose dial-back the inbox gave up on is carried again: the store waits for the inbox's OK", T, () =>
    withStore(async ({ connect }) => {
      const c = await connect(1);
      const pending = c.get("later", 5000);
      // The first dial back meets an inbox that challenges, takes the bytes and closes unread, as one does whose
      // handshake deadline passed while a lost segment waited out its retransmission (5% loss, 3 s after a lost SYN).
      const inbox = c["inbox"];
      const [take] = inbox.listeners("connection");
      inbox.removeAllListeners("connection");
      let dials = 0;
      inbox.on("connection", (socket) => {
        if (++dials > 1) return take(socket);
        socket.on("error", () => {});
        socket.write(encodeMessage({ type: "challenge", nonce: Buffer.alloc(32, 7) }));
        socket.once("data", () => socket.destroy());
      });
      const other = await connect(2);
      await other.set("later", "real");
      assert.equal((await pending).toString(), "real");
      assert.equal(dials, 2, "dialled again");
    }));

  test("barrier timeout says how many arrived, and which did not", T, () =>
    withStore(async ({ connect }) => {
      const c = await connect(1);
      await assert.rejects(
        c.barrier("lonely", 3, 150),
        { message: 'rendezvous: barrier "lonely" timed out after 150 ms with 1 of 3 ranks arrived; not arrived: rank 0, rank 2' },
      );
    }));

  test("allGather gives every rank's value in rank order; a timeout names the ranks that never gave theirs", T, () =>
    withStore(async ({ connect }) => {
      const clients = await Promise.all([0, 1, 2].map((r) => connect(r)));
      const all = await Promise.all(clients.map((c, r) => c.allGather("g", 3, `v${r}`)));
      for (const got of all) assert.deepEqual(got.map(String), ["v0", "v1", "v2"]);
      await assert.rejects(clients[1].allGather("lonely", 3, "x", 150), { message: 'rendezvous: exchange "lonely" timed out after 150 ms; not arrived: rank 0, rank 2' });
    }));

  test("get and wait timeouts name the keys", T, () =>
    withStore(async ({ connect }) => {
      const c = await connect();
      const t0 = Date.now();
      await assert.rejects(c.get("missing", 150), {
        message: 'rendezvous: timed out after 150 ms waiting for key "missing"',
      });
      assert.ok(Date.now() - t0 >= 140);
      await c.set("a", "1");
      await assert.rejects(c.wait(["a", "b", "c"], 100), {
        message: 'rendezvous: timed out after 100 ms waiting for keys "a", "b", "c"',
      });
      await assert.rejects(c.get("missing", 0), /waiting for key "missing"/);
    }));

  test("wrong token is rejected with a clear error; the server keeps serving", T, () =>
    withStore(async ({ server, connect }) => {
      const good = await connect(0);
      await good.set("secret", "s3cret");
      await assert.rejects(
        StoreClient.connect({ host: "127.0.0.1", port: server.port, token: "other-job", rank: 1, timeoutMs: 2000 }),
        { message: `rendezvous at 127.0.0.1:${server.port} rejected this rank: wrong job token (is another job using this port?)` },
      );
      const again = await connect(1);
      assert.equal((await again.get("secret")).toString(), "s3cret");
    }));

  test("connections that never prove the token neither count nor stay: 20 idle ones delay no rank and go within the deadline", T, async () => {
    const refused = [];
    const server = await StoreServer.listen({ host: "127.0.0.1", port: 0, token: TOKEN, refused: (line) => refused.push(line) });
    const idle = Array.from({ length: 20 }, () => net.createConnection({ host: "127.0.0.1", port: server.port }).on("error", () => {}).resume());
    const gone = idle.map((s) => new Promise((resolve) => s.once("close", () => resolve(Date.now()))));
    await Promise.all(idle.map((s) => new Promise((resolve) => s.once("connect", resolve))));
    const t0 = Date.now();
    // More ranks than the cap on authenticated connections: they take turns, and the strangers take no place.
    const clients = await Promise.all(Array.from({ length: 20 }, (_, r) => StoreClient.connect({ host: "127.0.0.1", port: server.port, token: TOKEN, rank: r, timeoutMs: 5000 })));
    await Promise.all(clients.map((c) => c.barrier("b", 20)));
    const met = Date.now() - t0;
    assert.ok(met < 1500, `20 ranks met in ${met} ms beside 20 idle connections`);
    const closed = await Promise.all(gone);
    for (const at of closed) assert.ok(at - t0 < 4000, `an idle connection stayed ${at - t0} ms`);
    assert.equal(refused.length, 20, refused.join("\n"));
    for (const line of refused) assert.match(line, /^rendezvous: refused a connection from 127\.0\.0\.1:\d+: no handshake within 3 s$/);
    for (const c of clients) c.close();
    await server.close();
  });

  test("raw peers sending bad frames get one ERROR, never a value, and are closed", T, () =>
    withStore(
      async ({ server, connect }) => {
        const good = await connect(0);
        await good.set("secret", "s3cret");
        const port = server.port;
        const hello = (nonce) => [helloFor(TOKEN, nonce, 9)];
        const wrongToken = /^rendezvous: wrong job token from 127\.0\.0\.1:\d+$/;

        // Data before HELLO: asks for the secret straight away.
        const early = await rawExchange(port, [encodeMessage({ type: "get", id: 1, key: "secret", timeoutMs: 0 })]);
        assertOnlyError(early, wrongToken);
        assert.ok(!early.includes(Buffer.from("s3cret")));
        // Wrong token, with a request pipelined behind it.
        const bad = await rawExchange(port, (nonce) => [helloFor("nope", nonce, 1), encodeMessage({ type: "get", id: 1, key: "secret", timeoutMs: 0 })]);
        assertOnlyError(bad, wrongToken);
        // The right token's proof, but of another challenge (replayed from another connection).
        const replayed = await rawExchange(port, [helloFor(TOKEN, Buffer.alloc(32), 9)]);
        assertOnlyError(replayed, wrongToken);
        assert.ok(!bad.includes(Buffer.from("s3cret")));
        // Garbage (an HTTP request reads as an absurd frame length).
        assertOnlyError(await rawExchange(port, [Buffer.from("GET / HTTP/1.1\r\nHost: x\r\n\r\n")]), wrongToken);
        // Oversize announced length, nothing else sent.
        assertOnlyError(await rawExchange(port, [Buffer.of(0xff, 0xff, 0xff, 0xff)]), wrongToken);
        // A frame whose fields are truncated.
        assertOnlyError(await rawExchange(port, [Buffer.of(0, 0, 0, 5, 1, 0, 0, 0, 99)]), wrongToken);
        // A frame cut off mid-way, then the peer hangs up: nothing is sent back.
        const cut = await rawExchange(port, (nonce) => [hello(nonce)[0].subarray(0, 20)], { endAfterWrite: true });
        assert.equal(cut.length, 0);

        // After a good HELLO: garbage and oversize frames are reported as malformed.
        const afterHello = await rawExchange(port, (nonce) => [...hello(nonce), Buffer.of(0, 0, 0, 2, 0x77, 0)]);
        const [ok, err] = framesOf(afterHello);
        assert.equal(ok.type, "welcome");
        assert.match(err.message, /^rendezvous: malformed frame from rank 9 at 127\.0\.0\.1:\d+: unknown message type 119$/);
        const big = encodeMessage({ type: "set", key: "big", value: Buffer.alloc(2048) });
        const oversize = framesOf(await rawExchange(port, (nonce) => [...hello(nonce), big]));
        assert.match(oversize[1].message, /exceeds the 1024-byte limit/);

        // Everyone else is still served.
        assert.equal((await good.get("secret")).toString(), "s3cret");
        await assert.rejects(good.get("big", 0), /waiting for key "big"/);
      },
      { maxFrameBytes: 1024 },
    ));

  test("pending requests fail when the server goes away", T, async () => {
    const server = await StoreServer.listen({ host: "127.0.0.1", port: 0, token: TOKEN });
    const c = await StoreClient.connect({ host: "127.0.0.1", port: server.port, token: TOKEN, rank: 0, timeoutMs: 5000 });
    const pending = c.get("never", 10_000);
    await server.close();
    await assert.rejects(pending, { message: `rendezvous: connection to 127.0.0.1:${server.port} lost: rank 0, which serves the store, has left` });
    await assert.rejects(c.set("k", "v"), /connection to .* lost/);
    c.close();
  });

  test("a closing store still answers what a link asks that it can answer at once, drops a wait, and lets idle links go", T, async () => {
    const server = await StoreServer.listen({ host: "127.0.0.1", port: 0, token: TOKEN });
    const c = await StoreClient.connect({ host: "127.0.0.1", port: server.port, token: TOKEN, rank: 0, timeoutMs: 5000 });
    await c.set("x/0", "a");
    await c.set("x/1", "b");
    c.close();
    // A link past its HELLO, as a rank's is while its request for an exchange rank 0 just completed is on its
    // way: rank 0 leaves (failing) right then.
    const link = async (port) => {
      const socket = net.createConnection({ host: "127.0.0.1", port });
      const received = [];
      socket.on("data", (d) => received.push(d));
      socket.on("error", () => {});
      const challenge = await new Promise((resolve) => socket.once("data", resolve));
      socket.write(helloFor(TOKEN, framesOf(challenge)[0].nonce, 1, 1));
      await new Promise((resolve) => socket.once("data", resolve));
      return { socket, received, closed: new Promise((resolve) => socket.once("close", resolve)) };
    };
    const asking = await link(server.port);
    const closing = server.close();
    asking.socket.write(encodeMessage({ type: "getall", id: 1, keys: ["x/0", "x/1"], timeoutMs: 5000 }));
    asking.socket.write(encodeMessage({ type: "wait", id: 2, keys: ["never"], timeoutMs: 5000 }));
    await asking.closed;
    await closing;
    const frames = framesOf(Buffer.concat(asking.received));
    assert.deepEqual(frames.map((f) => f.type), ["challenge", "welcome", "values"], "the answer, then the link dropped instead of PARKED");
    assert.deepEqual(frames[2].values.map(String), ["a", "b"]);

    // A link that never closes (its rank is stopped) holds the closing server back for a second at most.
    const server2 = await StoreServer.listen({ host: "127.0.0.1", port: 0, token: TOKEN });
    const stuck = await link(server2.port);
    const started = Date.now();
    await server2.close();
    assert.ok(Date.now() - started < 3000, `close took ${Date.now() - started} ms`);
    await stuck.closed;
  });

  test("IPv6 loopback", T, async (t) => {
    let server;
    try {
      server = await StoreServer.listen({ host: "::1", port: 0, token: TOKEN });
    } catch (err) {
      const reason = `::1 is not available here (${err.message})`;
      console.log(`# skipping IPv6 test: ${reason}`);
      t.skip(reason);
      return;
    }
    try {
      const c = await StoreClient.connect({ host: "::1", port: server.port, token: TOKEN, rank: 0, timeoutMs: 2000 });
      await c.set("v6", "yes");
      assert.equal((await c.get("v6")).toString(), "yes");
      c.close();
      await assert.rejects(
        StoreClient.connect({ host: "::1", port: server.port, token: "x", rank: 0, timeoutMs: 2000 }),
        { message: `rendezvous at [::1]:${server.port} rejected this rank: wrong job token (is another job using this port?)` },
      );
    } finally {
      await server.close();
    }
  });

  test("connect gives up after timeoutMs when nothing listens", T, async () => {
    const port = await unusedPort();
    const t0 = Date.now();
    await assert.rejects(
      StoreClient.connect({ host: "127.0.0.1", port, token: TOKEN, rank: 1, timeoutMs: 400 }),
      { message: `rendezvous: could not reach 127.0.0.1:${port} within 0.4 s (is rank 0 running?)` },
    );
    const elapsed = Date.now() - t0;
    assert.ok(elapsed >= 390 && elapsed < 3000, `gave up after ${elapsed} ms`);
  });

  test("connect retries until the server comes up", T, async () => {
    const port = await unusedPort();
    const connecting = StoreClient.connect({ host: "127.0.0.1", port, token: TOKEN, rank: 1, timeoutMs: 5000 });
    await new Promise((r) => setTimeout(r, 300));
    const server = await StoreServer.listen({ host: "127.0.0.1", port, token: TOKEN });
    const c = await connecting;
    await c.set("k", "v");
    c.close();
    await server.close();
  });

  test("an idle or closed client does not keep its process alive", T, async () => {
    const server = await StoreServer.listen({ host: "127.0.0.1", port: 0, token: TOKEN });
    const url = new URL("../dist/comm/store.js", import.meta.url).href;
    const script = `
      const { StoreClient } = await import(${JSON.stringify(url)});
      const opts = { host: "127.0.0.1", port: ${server.port}, token: ${JSON.stringify(TOKEN)}, timeoutMs: 5000 };
      const a = await StoreClient.connect({ ...opts, rank: 1 });
      await a.set("from-child", "1");
      a.close();
      const idle = await StoreClient.connect({ ...opts, rank: 2 });
      await idle.add("idle", 1);
    `;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: "inherit" });
    const code = await new Promise((resolve) => child.on("exit", resolve));
    assert.equal(code, 0);
    await server.close();
  });
});

describe("rendezvous", () => {
  test("all ranks join, use the store, and leave; rank 0 outlives the others' use", T, async () => {
    const port = await unusedPort();
    const opts = { size: 3, addr: "127.0.0.1", port, token: TOKEN, timeoutMs: 5000 };
    // Non-zero ranks start first: they must wait for rank 0 to come up.
    const others = [1, 2].map((rank) => rendezvous({ ...opts, rank }));
    await new Promise((r) => setTimeout(r, 100));
    const [r0, r1, r2] = await Promise.all([rendezvous({ ...opts, rank: 0 }), ...others]);
    assert.ok(r0.server);
    assert.equal(r1.server, undefined);
    await r2.store.set("from-2", "hi");
    let rank0Closed = false;
    const closing0 = r0.close().then(() => (rank0Closed = true));
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(rank0Closed, false, "rank 0 must keep the store up while other ranks have not left");
    assert.equal((await r1.store.get("from-2")).toString(), "hi");
    await Promise.all([r1.close(), r2.close()]);
    await closing0;
  });

  test("rank 0 listens on the address it is given, and on every interface for a host name", T, async () => {
    for (const [addr, listening] of [["127.0.0.1", ["127.0.0.1"]], ["localhost", ["::", "0.0.0.0"]]]) {
      const r0 = await rendezvous({ rank: 0, size: 1, addr, port: await unusedPort(), token: TOKEN, timeoutMs: 1000 });
      try {
        assert.ok(listening.includes(r0.server.host), `${addr}: listening on ${r0.server.host}`);
      } finally {
        await r0.close();
      }
    }
  });

  test("rank 0 that meets only strangers says so: the connections that never proved the job's secret, and from where (#63)", T, async () => {
    const port = await unusedPort();
    const r0 = rendezvous({ rank: 0, size: 2, addr: "127.0.0.1", port, token: TOKEN, timeoutMs: 1000 });
    // Two strangers in place of rank 1: a frame too long for a HELLO, and a HELLO under another token.
    const knock = (bytes) =>
      new Promise((resolve) => {
        const s = net.createConnection({ host: "127.0.0.1", port }, () => s.write(bytes)).on("error", () => setTimeout(() => resolve(knock(bytes)), 20));
        s.on("close", resolve).resume();
      });
    await Promise.all([knock(Buffer.from([0, 0, 4, 0, 1])), knock(Buffer.alloc(90, 1))]);
    await assert.rejects(r0, (err) => {
      assert.match(err.message, /not arrived: rank 1; meanwhile rank 0's store closed 2 connections that never proved the job's secret, from 127\.0\.0\.1$/);
      return true;
    });
  });

  test("a busy port is reported clearly", T, async () => {
    const blocker = await StoreServer.listen({ host: "127.0.0.1", port: 0, token: "other" });
    try {
      await assert.rejects(
        rendezvous({ rank: 0, size: 1, addr: "127.0.0.1", port: blocker.port, token: TOKEN, timeoutMs: 1000 }),
        { message: `rendezvous: cannot listen on 127.0.0.1:${blocker.port}: address in use` },
      );
    } finally {
      await blocker.close();
    }
  });

  test("rank 0 stops waiting for a rank that never leaves after timeoutMs", T, async () => {
    const port = await unusedPort();
    const opts = { size: 2, addr: "127.0.0.1", port, token: TOKEN, timeoutMs: 300 };
    const [r0, r1] = await Promise.all([rendezvous({ ...opts, rank: 0 }), rendezvous({ ...opts, rank: 1 })]);
    const t0 = Date.now();
    await r0.close();
    assert.ok(Date.now() - t0 < 3000);
    r1.store.close();
  });
});
