// A stranger on the node (DESIGN.md, "Security"): watches /proc/net/tcp and tcp6 for listeners that were not
// there when it started, and answers each one's challenge with a forged tcp-transport Hello "from rank 0"
// to rank 1 on every lane, proved under the key given on its command line (hex: what it could compute, as
// from a derived secret). It holds each connection open, as a forger that meant to feed the lane would,
// and prints one JSON line per Hello: the port and lane, and whether the rank answered (took it for rank 0).
// Listeners that do not open with the transport's Challenge (the store, the launcher's own) are left alone.
// Prints "ready" once it watches.
//   node stranger.mjs <key hex> <world size>
import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import net from "node:net";

const [keyHex, world] = process.argv.slice(2);
const key = Buffer.from(keyHex, "hex");
const LANES = 4;
// native/src/backends/tcp/wire.cc: a Challenge (magic, version, nonce) and the Hello that answers it.
const CHALLENGE_MAGIC = 0x43444d53;
const HELLO_MAGIC = 0x48444d53;
const VERSION = 2;
const CHALLENGE_BYTES = 40;
const HELLO_BYTES = 88;

/** A Hello from rank 0 to rank 1 on `lane`, proving `key` against the challenge's nonce (wire.cc helloMac). */
function hello(lane, nonce) {
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
setInterval(() => {
  for (const port of listeningPorts()) {
    if (seen.has(port)) continue;
    seen.add(port);
    forge(port);
  }
}, 1);
console.log("ready");
