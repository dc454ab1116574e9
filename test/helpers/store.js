// Talking to a store server as a raw peer would (any bytes, no client library), and reading what it
// sent back as frames.
import net from "node:net";
import { FrameReader, decodeMessage } from "../../dist/comm/store-protocol.js";

/** Sends raw bytes, then collects everything the server sends until it closes the connection. */
export function rawExchange(port, chunks, { endAfterWrite = false } = {}) {
  return new Promise((resolve, reject) => {
    const received = [];
    const socket = net.createConnection({ host: "127.0.0.1", port }, async () => {
      for (const chunk of chunks) socket.write(chunk);
      if (endAfterWrite) socket.end();
    });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error("server did not close the connection"));
    }, 5000);
    socket.on("data", (d) => received.push(d));
    socket.on("error", () => {});
    socket.on("close", () => {
      clearTimeout(timer);
      resolve(Buffer.concat(received));
    });
  });
}

export function framesOf(bytes) {
  const reader = new FrameReader(1 << 30);
  reader.push(bytes);
  const out = [];
  for (let p = reader.next(); p !== undefined; p = reader.next()) out.push(decodeMessage(p));
  return out;
}

