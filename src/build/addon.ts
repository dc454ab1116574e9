// Building the native addon from the package's own sources (native/) with cmake-js, a dependency of the
// package, so a checkout and an installed package build alike.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
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
  const common = ["--directory", path.join(PACKAGE_ROOT, "native"), "--out", out, ...defines.map((d) => `--CD${d}`)];
  for (const step of [["configure"], ["build", ...(target ? ["--target", target] : [])]]) {
    const run = spawnSync(process.execPath, [cmakeJs, ...step, ...common], { stdio: "inherit", env: withNodeHeaders(process.env) });
    if (run.error) throw run.error;
    if (run.status !== 0) return run.status ?? 1;
  }
  return 0;
}
