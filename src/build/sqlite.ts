// The SQLite addon `runner exp` indexes campaigns with (better-sqlite3). The package bundles its dependencies,
// and npm 11 may hold back a bundled dependency's install script (allowScripts cannot approve one): the packed
// package carries the binding built where it was packed (prebuilds/<platform>/, like the runner's addon), and where
// that does not load (another Node), the package runs better-sqlite3's install script itself, from its own
// lifecycle script and from `runner build`. Where npm runs that script, it finds the same binding as an archive
// (prebuilds/sqlite/, named by .prebuild-installrc) and unpacks it instead of compiling SQLite for a minute.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { PLATFORM } from "../comm/native.js";
import { PACKAGE_ROOT } from "../version.js";
import { withNodeHeaders } from "./addon.js";

const require = createRequire(import.meta.url);

export const SQLITE_BINDING = "better_sqlite3.node";

const sqliteDir = () => path.dirname(require.resolve("better-sqlite3/package.json"));

/** better-sqlite3's own build, where its install script puts it. */
export const builtSqliteBinding = () => path.join(sqliteDir(), "build/Release", SQLITE_BINDING);

/** The binding to open databases with: better-sqlite3's own build, else the one the package carries for this platform. */
export function sqliteBinding(): string | undefined {
  const prebuilt = path.join(PACKAGE_ROOT, "prebuilds", PLATFORM, SQLITE_BINDING);
  return !existsSync(builtSqliteBinding()) && existsSync(prebuilt) ? prebuilt : undefined;
}

/** Whether better-sqlite3's compiled part loads here (its JS alone loads without it). */
export function sqliteLoads(): boolean {
  try {
    const Database = require("better-sqlite3") as new (file: string, o: object) => { close(): void };
    new Database(":memory:", { nativeBinding: sqliteBinding() }).close();
    return true;
  } catch {
    return false;
  }
}

/** npm's own folder: the npm running this script, else the one installed beside this Node. */
function npmRoot(): string {
  const cli = process.env.npm_execpath;
  return cli ? path.resolve(path.dirname(cli), "..") : path.resolve(path.dirname(process.execPath), "../lib/node_modules/npm");
}

/** Runs better-sqlite3's install script (a prebuilt binary where one can be fetched, else a build); its exit code. */
export function buildSqlite(): number {
  const dir = sqliteDir();
  const { scripts } = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")) as { scripts: { install: string } };
  // As npm runs a script: prebuild-install from node_modules/.bin, and `node-gyp` as npm's (its shim runs
  // $npm_config_node_gyp); better-sqlite3 carries SQLite's sources.
  const npm = npmRoot();
  const bin = [path.join(PACKAGE_ROOT, "node_modules/.bin"), path.join(npm, "node_modules/@npmcli/run-script/lib/node-gyp-bin"), path.dirname(process.execPath)];
  const run = spawnSync("sh", ["-c", scripts.install], {
    cwd: dir,
    stdio: "inherit",
    // Node's own headers, as for the runner's addon: node-gyp then downloads nothing.
    env: withNodeHeaders({
      ...process.env,
      PATH: [...bin, process.env.PATH].join(path.delimiter),
      npm_config_node_gyp: process.env.npm_config_node_gyp ?? path.join(npm, "node_modules/node-gyp/bin/node-gyp.js"),
    }),
  });
  if (run.error) throw run.error;
  if (run.status === 0) pruneSqliteBuild();
  return run.status ?? 1;
}

/**
 * Removes better-sqlite3's objects and test extension (15 MB) once its binding is linked: nothing loads them,
 * and npm packs a bundled dependency's folder as it lies, so they would double the package's size.
 */
export function pruneSqliteBuild(): void {
  const release = path.dirname(builtSqliteBinding());
  for (const f of ["obj", "obj.target", ".deps", "sqlite3.a", "test_extension.node"]) rmSync(path.join(release, f), { recursive: true, force: true });
}

/**
 * For `npm pack`: this machine's binding into `dir` as the archive prebuild-install would download for this
 * platform and Node, under the name it looks for; another platform or Node misses it and builds as before.
 */
export function packSqlitePrebuild(dir: string): void {
  const own = createRequire(path.join(sqliteDir(), "package.json"));
  const pkg = JSON.parse(readFileSync(path.join(sqliteDir(), "package.json"), "utf8")) as object;
  const opts = { ...(own("prebuild-install/rc") as (p: object) => object)(pkg), pkg };
  const url = (own("prebuild-install/util") as { getDownloadUrl(o: object): string }).getDownloadUrl(opts);
  const archive = path.join(dir, path.basename(url));
  mkdirSync(dir, { recursive: true });
  // Its entry as the install script unpacks it: build/Release/better_sqlite3.node under better-sqlite3's folder.
  const tar = spawnSync("tar", ["czf", archive, "-C", sqliteDir(), path.relative(sqliteDir(), builtSqliteBinding())], { stdio: "inherit" });
  if (tar.status !== 0) throw new Error(`tar could not write ${archive}`);
}
