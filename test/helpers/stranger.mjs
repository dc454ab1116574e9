// A stranger on the node (DESIGN.md, "Security"): watches /proc/net/tcp and tcp6 for listeners that were not
// there when it started, and goes at each new one in one of two ways.
//   forge <key hex> <world size>: answers each listener's challenge with a forged tcp-transport Hello "from
//     rank 0" to rank 1 on every lane, proved under the key given (what it could compute, as from a derived
//     secret). It holds each connection open, as a forger that meant to feed the lane would, and prints one
//     JSON line per Hello: the port and lane, and whether the rank answered (took it for rank 0). Listeners
//     that do not open with the transport's Challenge (the store, the launcher's own) are left alone.
//   crowd <count>: holds `count` connections on every new listener, whatever it is: half of them idle, half
//     with the first half of a Hello sent (issue 63: 64 of either once locked a rank's own peers out). It
//     never dials again what a listener closes, and prints one JSON line per listener once all its
//     connections are open: { port, kind: "tcp" (a rank's endpoint) or "store" (the store or a rank's inbox) }.
// Prints "ready" once it watches.
import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import net from "node:net";

const [mode, ...args] = process.argv.slice(2);
const LANES = 4;
// native/src/backends/tcp/wire.cc: a Challenge (magic, version, nonce) and the Hello that answers it.
const CHALLENGE_MAGIC = 0x43444d53;
const HELLO_MAGIC = 0x48444d53;
const VERSION = 2;
const CHALLENGE_BYTES = 40;
const HELLO_BYTES = 88;

/** A Hello from rank 0 to rank 1 on `lane`, proving `key` against the challenge's nonce (wire.cc helloMac). */
function hello(lane, nonce, [keyHex, world] = args) {
  const key = Buffer.from(keyHex, "hex");
  const b = Buffer.alloc(HELLO_BYTES);
  b.writeUInt32LE(HELLO_MAGIC, 0);
  b.writeUInt16LE(VERSION, 4);
  b.writeUInt16LE(lane, 6);
  b.writeInt32LE(0, 8);
  b.writeInt32LE(1, 12);
  b.writeInt32LE(Number(world), 16);
  const fields = Buffer.alloc(14);
  b.copy(fields, 0, 8, 20);
  fields.writeUInt16LE(lane, 12);
  const role = Buffer.alloc(24);
  role.write("spmd-runner tcp dial");
  createHmac("sha256", key).update(role).update(nonce).update(fields).digest().copy(b, 56);
  return b;
}

function listeningPorts() {
  const ports = new Set();
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    for (const line of readFileSync(file, "utf8").split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f[3] === "0A") ports.add(parseInt(f[1].split(":")[1], 16));
    }
  }
  return ports;
}

const seen = listeningPorts();
const held = [];
function forge(port) {
  for (let lane = 0; lane < LANES; lane++) {
    const socket = net.createConnection({ host: "127.0.0.1", port });
    let got = Buffer.alloc(0);
    let answered = false;
    // A listener that says nothing, or not our Challenge, is another program's (the launcher's own, as
    // mpirun's): left alone at once, as an attacker aiming at the runner would.
    const notOurs = setTimeout(() => socket.destroy(), 300);
    socket.on("data", (d) => {
      const before = got.length;
      got = Buffer.concat([got, d]);
      if (got.length >= 4 && got.readUInt32LE(0) !== CHALLENGE_MAGIC) return void socket.destroy();
      if (before < CHALLENGE_BYTES && got.length >= CHALLENGE_BYTES) {
        clearTimeout(notOurs);
        socket.write(hello(lane, got.subarray(8, CHALLENGE_BYTES)));
      }
      // A rank that took the Hello answers with its own after the challenge.
      answered ||= got.length >= CHALLENGE_BYTES + 4 && got.readUInt32LE(CHALLENGE_BYTES) === HELLO_MAGIC;
    });
    socket.on("error", () => {});
    // What happened is known once the rank answered or dropped it, or after a second of silence.
    const report = () => {
      if (socket.reported || got.length < CHALLENGE_BYTES) return;
      socket.reported = true;
      console.log(JSON.stringify({ port, lane, answered }));
    };
    socket.on("close", report);
    setTimeout(report, 1000);
    held.push(socket);
  }
}

/** Whether `first` (5 bytes or more) opens a runner's handshake: a tcp endpoint's Challenge, the store's CHALLENGE frame. */
function runnerSpeaks(first) {
  const STORE_CHALLENGE = 7;
  return first.readUInt32LE(0) === CHALLENGE_MAGIC || first[4] === STORE_CHALLENGE;
}

/** What the other half of the crowd sends once the listener spoke: half a Hello, or half a store HELLO frame. */
function halfHello(first) {
  if (first.readUInt32LE(0) === CHALLENGE_MAGIC) {
    const half = Buffer.alloc(HELLO_BYTES / 2);
    half.writeUInt32LE(HELLO_MAGIC, 0);
    half.writeUInt16LE(VERSION, 4);
    return half;
  }
  const STORE_HELLO = 1, STORE_HELLO_BYTES = 81;  // store-protocol.ts: u32be length, type, rank, port, 2 x (u32be length, 32 bytes)
  const half = Buffer.alloc(4 + STORE_HELLO_BYTES / 2);
  half.writeUInt32BE(STORE_HELLO_BYTES, 0);
  half[4] = STORE_HELLO;
  return half;
}

/**
 * A connection to `port` that calls `spoke(first bytes)` once the listener sent 5 bytes; with `half`, it
 * answers them with half a Hello. Held until the stranger exits.
 */
function connection(port, { half = false, spoke = () => {}, opened = () => {} } = {}) {
  const socket = net.createConnection({ host: "127.0.0.1", port });
  let first = Buffer.alloc(0);
  socket.on("connect", opened);
  socket.on("data", (d) => {
    if (first.length >= 5) return;
    first = Buffer.concat([first, d]);
    if (first.length < 5) return;
    if (half) socket.write(halfHello(first));
    spoke(first);
  });
  socket.on("error", () => {});
  held.push(socket);
  return socket;
}

/**
 * `count` connections to `port` once it shows itself a runner's listener (a probe, the first of them, read
 * its challenge), every other one half-sent; one line once all are open. A listener that says something
 * else is left alone; one silent for 300 ms (a rank's endpoint before its connecting thread runs, or
 * mpirun's own) is probed again, so mpirun's listeners never see more than one idle connection at a time.
 */
function crowd(port, count = Number(args[0])) {
  let open = 1, kind = "";
  const opened = () => ++open === count && console.log(JSON.stringify({ port, kind }));
  const probe = connection(port, {
    spoke: (first) => {
      clearTimeout(silence);
      if (!runnerSpeaks(first)) return void probe.destroy();
      kind = first.readUInt32LE(0) === CHALLENGE_MAGIC ? "tcp" : "store";
      for (let i = 1; i < count; i++) connection(port, { half: i % 2 === 1, opened });
    },
  });
  probe.on("error", () => clearTimeout(silence));  // the listener is gone
  const silence = setTimeout(() => {
    probe.destroy();
    setTimeout(() => crowd(port, count), 50);
  }, 300);
}

const attack = { forge, crowd }[mode];
if (!attack) throw new Error(`stranger.mjs: mode "${mode}" is neither forge nor crowd`);
setInterval(() => {
  for (const port of listeningPorts()) {
    if (seen.has(port)) continue;
    seen.add(port);
    attack(port);
  }
}, 1);
console.log("ready");
