// Which NCCL library the nccl backend opens: NCCL_LIBRARY when set (a path or soname; the tests point it
// at the ABI double), else the libnccl.so.2 of the NVIDIA pip wheel (nvidia-nccl-cu*) when python3 has
// one, else the soname libnccl.so.2 for the dynamic loader's search path.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { native } from "./native.js";

export const NCCL_SONAME = "libnccl.so.2";

export interface NcclLibrary {
  path: string;
  /** Where the path came from, for `runner info` and errors. */
  source: "NCCL_LIBRARY" | "nvidia wheel" | "soname";
}

/** The nvidia.nccl package's lib/libnccl.so.2, if python3 imports it; undefined otherwise. */
function wheelLibrary(): string | undefined {
  const found = spawnSync("python3", ["-c", "import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))"], {
    encoding: "utf8",
    timeout: 10_000,
    stdio: ["ignore", "pipe", "ignore"],
  });
  const dir = found.status === 0 ? found.stdout.trim() : "";
  const lib = dir && path.join(dir, "lib", NCCL_SONAME);
  return lib && existsSync(lib) ? lib : undefined;
}

export function ncclLibrary(env: NodeJS.ProcessEnv): NcclLibrary {
  if (env.NCCL_LIBRARY) return { path: env.NCCL_LIBRARY, source: "NCCL_LIBRARY" };
  const wheel = wheelLibrary();
  return wheel ? { path: wheel, source: "nvidia wheel" } : { path: NCCL_SONAME, source: "soname" };
}

/** "loadable (path, from source)" or "not loadable: why", for `runner info`. */
export function describeNccl(env: NodeJS.ProcessEnv): string {
  const lib = ncclLibrary(env);
  try {
    const probe = native().ncclProbe(lib.path);
    const notes = [`${lib.path} from ${lib.source}`];
    if (probe.hostMemory) notes.push("host-memory test double");
    if (probe.missing) notes.push(`without ${probe.missing}`);
    return `loadable (${notes.join("; ")})`;
  } catch (err) {
    return `not loadable: ${(err as Error).message}`;
  }
}
