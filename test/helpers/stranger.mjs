// A stranger on the node (DESIGN.md, "Security"): watches /proc/net/tcp and tcp6 for listeners that were not
// there when it started, and sends each a forged tcp-transport Hello "from rank 0" to rank 1 on every lane,
// under the key given on its command line (hex: what it could compute, as from a derived secret). It holds
// each connection open, as a forger that meant to feed the lane would, and prints one JSON line per Hello:
// the port and lane, and whether the rank answered (took it for rank 0). Prints "ready" once it watches.
//   node stranger.mjs <key hex> <world size>
import { readFileSync } from "node:fs";
import net from "node:net";

const [keyHex, world] = process.argv.slice(2);
const key = Buffer.from(keyHex, "hex");
const LANES = 4;
const HELLO_BYTES = 56;
const MAGIC = 0x48444d53;

/** The transport's Hello (native/src/backends/tcp/wire.cc): magic, version, lane, from, to, world size, key. */
function hello(lane) {
  const b = Buffer.alloc(HELLO_BYTES);
  b.writeUInt32LE(MAGIC, 0);
  b.writeUInt16LE(1, 4);
  b.writeUInt16LE(lane, 6);
  b.writeInt32LE(0, 8);
  b.writeInt32LE(1, 12);
  b.writeInt32LE(Number(world), 16);
  key.copy(b, 24);
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
    const socket = net.createConnection({ host: "127.0.0.1", port }, () => socket.write(hello(lane)));
    // Other listeners (the store, its clients' inboxes) may say something; a rank that took the Hello answers with its own.
    let answered = false;
    socket.on("data", (d) => (answered ||= d.length >= 4 && d.readUInt32LE(0) === MAGIC));
    socket.on("error", () => {});
    // What happened is known once the rank answered or dropped it, or after a second of silence.
    const report = () => {
      if (socket.reported) return;
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
