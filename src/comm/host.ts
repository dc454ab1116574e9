// Which ranks share a host. Two processes count as one host when they could share memory and loopback
// addresses: same machine (boot id), same network namespace and same IPC namespace. So containers on one
// machine are separate hosts, and so are network namespaces (which the tests use as hosts).
import { readFileSync, readlinkSync } from "node:fs";
import os from "node:os";

export interface HostIdentity {
  /** Equal exactly for processes of one host. */
  key: string;
  /** For people: the host name. */
  name: string;
}

function tryRead(read: () => string): string {
  try {
    return read().trim();
  } catch {
    return ""; // not Linux, or /proc is not mounted: the host name alone then decides
  }
}

export function hostIdentity(): HostIdentity {
  const name = os.hostname();
  const parts = [
    name,
    tryRead(() => readFileSync("/proc/sys/kernel/random/boot_id", "utf8")),
    tryRead(() => readlinkSync("/proc/self/ns/net")),
    tryRead(() => readlinkSync("/proc/self/ns/ipc")),
  ];
  return { key: parts.join("|"), name };
}
