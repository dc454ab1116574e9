// The NIC's own speed, as sysfs reports it, for doctor's absolute reference when no --expect is given.
// Only interfaces backed by a device count: a virtual one reports a made-up speed (veth says 10000 Mbit/s
// whatever it carries) or none (bridges, tunnels, and a down link say -1 or refuse the read).
import { existsSync, readFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { interfaceMatches } from "../comm/tcp-address.js";
import type { DoctorNic } from "../results.js";

/** What a NIC reports: sysfs speed in Mbit/s (1e6 bits), or null where it reports none. */
function speedOf(root: string, name: string): number | null {
  if (!existsSync(path.join(root, name, "device"))) return null;
  try {
    const v = Number(readFileSync(path.join(root, name, "speed"), "utf8").trim());
    return Number.isFinite(v) && v > 0 ? v : null;
  } catch {
    return null;
  }
}

/**
 * This host's fastest NIC that carries an address (among those --iface names, or the one holding its
 * address, when given), or null when none reports a speed.
 */
export function hostNic(iface: string | undefined, interfaces = os.networkInterfaces(), root = "/sys/class/net"): DoctorNic | null {
  const names = Object.entries(interfaces)
    .filter(([name, infos = []]) => infos.some((i) => !i.internal) && (iface === undefined || (net.isIP(iface) ? infos.some((i) => i.address === iface) : interfaceMatches(name, iface))))
    .map(([name]) => name);
  const nics = names.flatMap((name) => {
    const mbit = speedOf(root, name);
    return mbit === null ? [] : [{ name, mbit }];
  });
  return nics.reduce<DoctorNic | null>((x, y) => (x === null || y.mbit > x.mbit ? y : x), null);
}

/** Mbit/s of a full-duplex NIC as GB/s each way, the unit of doctor's matrix. */
export const nicGbps = (mbit: number): number => mbit / 8000;
