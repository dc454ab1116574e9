// Talking to a store server as a raw peer would (any bytes, no client library), and reading what it
// sent back as frames.
import { randomBytes } from "node:crypto";
import net from "node:net";
import { FrameReader, decodeMessage, encodeMessage, handshakeMac } from "../../dist/comm/store-protocol.js";

/** A HELLO that proves `token` against the server's challenge `nonce`, as a rank's client sends it. */
export function helloFor(token, nonce, rank, replyPort = 0) {
  return encodeMessage({ type: "hello", rank, replyPort, nonce: randomBytes(32), mac: handshakeMac(token, "hello", nonce, rank, replyPort) });
}

/**
 * Takes the server's CHALLENGE, sends raw bytes (`chunks`, or what `chunks(nonce)` makes of the challenge's
 * nonce), then collects everything else the server sends until it closes the connection.
 */
export function rawExchange(port, chunks, { endAfterWrite = false } = {}) {
  return new Promise((resolve, reject) => {
    const received = [];
    const reader = new FrameReader(1 << 10);
    let challenged = false;
    const socket = net.createConnection({ host: "127.0.0.1", port });
    socket.on("data", (d) => {
      if (challenged) return void received.push(d);
      reader.push(d);
      const payload = reader.next();
      if (payload === undefined) return;
      challenged = true;
      const { nonce } = decodeMessage(payload);
      for (const chunk of typeof chunks === "function" ? chunks(nonce) : chunks) socket.write(chunk);
      if (endAfterWrite) socket.end();
    });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error("server did not close the connection"));
    }, 5000);
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

