// A free port for rank 0's store, found with nothing but Node's own modules: test helpers and scripts import it
// without the launcher's dependencies (a GPU machine packed by scripts/gpu-pack.sh has no node_modules).
import { readFileSync } from "node:fs";
import net from "node:net";

/** Listens on `port` (0: the OS picks) and closes again; resolves with the port, or undefined where it is taken. */
function probePort(host: string, port: number): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once("error", (err: NodeJS.ErrnoException) => (err.code === "EADDRINUSE" ? resolve(undefined) : reject(err)));
    probe.listen({ host, port }, () => {
      const { port: bound } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(bound));
    });
  });
}

/** The first port of the kernel's ephemeral range, from which outgoing connections take theirs (Linux). */
function ephemeralLow(): number | undefined {
  try {
    const low = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
    return Number.isInteger(low) ? low : undefined;
  } catch {
    return undefined;
  }
}

const PORT_FLOOR = 10000;

/**
 * A port for rank 0's store that is free now. Taken below the ephemeral range where there is room: between
 * this probe and rank 0's listen, a port the OS handed out (port 0) can become the source port of any
 * program's outgoing connection, the ranks' own included, and a bench run saw rank 0 fail with "address in
 * use" that way. Below the range only a program that asks for that very port can take it.
 */
export async function freePort(host: string): Promise<number> {
  const low = ephemeralLow();
  if (low !== undefined && low > PORT_FLOOR + 1000) {
    for (let attempt = 0; attempt < 20; attempt++) {
      const port = await probePort(host, PORT_FLOOR + Math.floor(Math.random() * (low - PORT_FLOOR)));
      if (port !== undefined) return port;
    }
  }
  const port = await probePort(host, 0);
  if (port === undefined) throw new Error(`runner launch: no free port on ${host}`);
  return port;
}
