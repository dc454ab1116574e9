// Building the native addon from the package's own sources (native/) with cmake-js, a dependency of the
// package, so a checkout and an installed package build alike.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, realpathSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { PACKAGE_ROOT } from "../version.js";

export interface BuildOptions {
  /** The CMake build directory. */
  out: string;
  /** Only this CMake target (and what it needs), e.g. spmd_native for the addon alone. */
  target?: string;
  /** CMake cache entries, NAME=VALUE. */
  defines: readonly string[];
}

/** The same directory, links resolved; false where either does not exist. */
function sameDirectory(a: string, b: string): boolean {
  try {
    return realpathSync(a) === realpathSync(b);
  } catch {
    return false;
  }
}

/**
 * A build directory whose CMakeCache.txt was written for other paths (the checkout was moved or copied since)
 * makes CMake refuse to configure; its cache and CMakeFiles/ are removed so configuring starts afresh (what
 * was built is then rebuilt). Returns the directory the cache was written for, or undefined where it fits.
 */
export function forgetMovedCache(out: string, source: string): string | undefined {
  let cache: string;
  try {
    cache = readFileSync(path.join(out, "CMakeCache.txt"), "utf8");
  } catch {
    return undefined;
  }
  const entry = (name: string) => cache.match(new RegExp(`^${name}:INTERNAL=(.*)$`, "m"))?.[1];
  const [home, cacheDir] = [entry("CMAKE_HOME_DIRECTORY"), entry("CMAKE_CACHEFILE_DIR")];
  if (home === undefined || cacheDir === undefined || (sameDirectory(home, source) && sameDirectory(cacheDir, out))) return undefined;
  rmSync(path.join(out, "CMakeCache.txt"), { force: true });
  rmSync(path.join(out, "CMakeFiles"), { recursive: true, force: true });
  return home;
}

/**
 * The environment for cmake-js, with the running Node's own headers (its install's <prefix>/include/node)
 * where it has them: else cmake-js downloads them from nodejs.org, and a machine without internet cannot
 * build. npm's nodedir, where set (`npm ci` passes it as npm_config_nodedir), wins.
 */
export function withNodeHeaders(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  if (env.npm_config_nodedir) return env;
  const prefix = path.resolve(path.dirname(process.execPath), "..");
  return existsSync(path.join(prefix, "include/node/node.h")) ? { ...env, npm_config_nodedir: prefix } : env;
}

/**
 * Configures, then builds; returns the exit code. Configuring every time (cmake-js `build` alone does not
 * once a build directory exists) is what finds MPI or nvcc installed since the last build: CMake prints
 * which optional parts it built and why it skipped the others.
 */
export function buildAddon({ out, target, defines }: BuildOptions): number {
  const cmakeJs = createRequire(import.meta.url).resolve("cmake-js/bin/cmake-js");
  const source = path.join(PACKAGE_ROOT, "native");
  const moved = forgetMovedCache(out, source);
  if (moved) console.log(`-- spmd: ${out} was configured for ${moved}; configuring afresh for ${source}`);
  const common = ["--directory", source, "--out", out, ...defines.map((d) => `--CD${d}`)];
  for (const step of [["configure"], ["build", ...(target ? ["--target", target] : [])]]) {
    const run = spawnSync(process.execPath, [cmakeJs, ...step, ...common], { stdio: "inherit", env: withNodeHeaders(process.env) });
    if (run.error) throw run.error;
    if (run.status !== 0) return run.status ?? 1;
  }
  return 0;
}
