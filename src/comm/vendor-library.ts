// Which vendor library a library backend opens. nccl: NCCL_LIBRARY when set (a path or soname; the tests
// point it at the ABI double), else the libnccl.so.2 of the NVIDIA pip wheel (nvidia-nccl-cu*) when
// python3 has one, else the soname for the dynamic loader's search path. hccl: HCCL_LIBRARY, else
// libhccl.so (CANN's set_env.sh puts it on LD_LIBRARY_PATH).
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { BackendError } from "./errors.js";
import { native } from "./native.js";

export type LibraryBackend = "nccl" | "hccl";

export interface VendorLibrary {
  path: string;
  /** Where the path came from, for `runner info` and errors. */
  source: "environment" | "nvidia wheel" | "soname";
}

const VENDORS = {
  nccl: { variable: "NCCL_LIBRARY", soname: "libnccl.so.2", wheel: "nvidia.nccl" },
  hccl: { variable: "HCCL_LIBRARY", soname: "libhccl.so", wheel: undefined },
} as const;

/** The pip package's lib/<soname>, if python3 imports the package; undefined otherwise. */
function wheelLibrary(pkg: string, soname: string): string | undefined {
  const found = spawnSync("python3", ["-c", `import ${pkg}, os; print(os.path.dirname(${pkg}.__file__))`], {
    encoding: "utf8",
    timeout: 10_000,
    stdio: ["ignore", "pipe", "ignore"],
  });
  const dir = found.status === 0 ? found.stdout.trim() : "";
  const lib = dir && path.join(dir, "lib", soname);
  return lib && existsSync(lib) ? lib : undefined;
}

export function vendorLibrary(backend: LibraryBackend, env: NodeJS.ProcessEnv): VendorLibrary {
  const v = VENDORS[backend];
  const set = env[v.variable];
  if (set) return { path: set, source: "environment" };
  const wheel = v.wheel && wheelLibrary(v.wheel, v.soname);
  return wheel ? { path: wheel, source: "nvidia wheel" } : { path: v.soname, source: "soname" };
}

/** For the results' manifest: "NCCL 2.21.5 (libnccl.so.2)", the backend's name where the library gives no version. */
export function libraryVersion(backend: LibraryBackend, env: NodeJS.ProcessEnv): string {
  const lib = vendorLibrary(backend, env);
  const probe = native().libraryProbe(backend, lib.path);
  return `${probe.version || backend} (${lib.path})`;
}

/** Refuses, as bad input (exit 2), a library that does not load here: "nccl: cannot load libnccl.so.2: ...". */
export function checkLibrary(backend: LibraryBackend, env: NodeJS.ProcessEnv): void {
  try {
    native().libraryProbe(backend, vendorLibrary(backend, env).path);
  } catch (err) {
    throw new BackendError((err as Error).message);
  }
}

/** "loadable (path, from where)" or "not loadable: why", for `runner info`. */
export function describeLibrary(backend: LibraryBackend, env: NodeJS.ProcessEnv): string {
  const lib = vendorLibrary(backend, env);
  try {
    const probe = native().libraryProbe(backend, lib.path);
    const notes = [`${lib.path} from ${lib.source === "environment" ? VENDORS[backend].variable : lib.source}`];
    if (probe.version) notes.unshift(probe.version);
    if (probe.missing) notes.push(`without ${probe.missing}`);
    return `loadable (${notes.join("; ")})`;
  } catch (err) {
    return `not loadable: ${(err as Error).message}`;
  }
}

/**
 * What device `index` of a job on `device` has free, for the memory plan before the ranks meet; undefined
 * where its runtime cannot say (no library or runtime here: opening the communicator says why).
 */
export function deviceMemory(device: "cuda" | "npu", env: NodeJS.ProcessEnv, index: number): { bytes: number; source: string } | undefined {
  const backend = device === "cuda" ? "nccl" : "hccl";
  try {
    const m = native().deviceMemory(backend, vendorLibrary(backend, env).path, index);
    return { bytes: m.free, source: `${m.call} on ${device}:${index}` };
  } catch {
    return undefined;
  }
}
