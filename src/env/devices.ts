// What this host holds, for `runner info` and the results' manifest.
import { readdirSync, readFileSync } from "node:fs";
import os from "node:os";

/** The driver's "Model:" line for the GPU at `bus`. */
function nvidiaModel(bus: string): string {
  try {
    return /^Model:\s*(.+)$/m.exec(readFileSync(`/proc/driver/nvidia/gpus/${bus}/information`, "utf8"))?.[1]?.trim() ?? "unknown model";
  } catch {
    return "unknown model";
  }
}

/** NVIDIA GPUs as the driver lists them (model and bus id; no driver: none); Ascend NPUs appear under /dev/davinci*. */
export function gpuList(): string[] {
  const found: string[] = [];
  try {
    found.push(...readdirSync("/proc/driver/nvidia/gpus").map((bus) => `nvidia ${nvidiaModel(bus)} (${bus})`));
  } catch {
    // no NVIDIA driver loaded
  }
  try {
    found.push(...readdirSync("/dev").filter((d) => /^davinci\d+$/.test(d)).map((d) => `ascend ${d}`));
  } catch {
    // no /dev listing: nothing to add
  }
  return found;
}

export function cpuModel(): string {
  return os.cpus()[0]?.model.trim() ?? "unknown model";
}
