// npm's lifecycle scripts (package.json: prepare, install).
//  - prepare (after `npm ci` in a checkout, and before `npm pack`; never for an installed tarball): build the
//    addon and the TypeScript; for `npm pack`, also put the addon where the package carries it,
//    prebuilds/<platform>-<arch>/, so an install needs no build where that fits.
//  - install (also in a checkout, where prepare does the work): in an installed package where no addon loads
//    (none packed for this platform, or the packed one misses a library such as this machine's libmpi), build
//    one. A failed build must not fail the install: the first command then says in one line what to run. npm
//    11 may hold this script back until the user allows it; the same line covers that.
//  Both also build the SQLite addon of `runner exp` (better-sqlite3) where neither its own build nor the packed
//  one loads: npm 11 may hold back a bundled dependency's install script (allowScripts cannot approve one),
//  so the package runs it (`runner build`, src/build/sqlite.ts).
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const runner = path.join(root, "runner/index.js");
const checkout = existsSync(path.join(root, "tsconfig.json"));

function run(command, args) {
  return spawnSync(command, args, { cwd: root, stdio: "inherit" }).status;
}

if (process.env.npm_lifecycle_event === "prepare" && checkout) {
  const status = run("npm", ["run", "build"]);
  if (status !== 0) process.exit(status ?? 1);
  // npm's own run of better-sqlite3's install script (`npm ci` here) leaves the build's objects, which npm pack
  // would carry.
  const { pruneSqliteBuild, packSqlitePrebuild } = await import("../dist/build/sqlite.js");
  pruneSqliteBuild();
  if (process.env.npm_command === "pack") {
    const dir = path.join(root, "prebuilds", `${process.platform}-${process.arch}`);
    mkdirSync(dir, { recursive: true });
    copyFileSync(path.join(root, "native/build/Release/spmd_native.node"), path.join(dir, "spmd_native.node"));
    // And better-sqlite3's binding, which the bundled copy of it (its own files only) would not carry.
    copyFileSync(path.join(root, "node_modules/better-sqlite3/build/Release/better_sqlite3.node"), path.join(dir, "better_sqlite3.node"));
    // And the same as the archive better-sqlite3's install script unpacks (.prebuild-installrc points it there).
    packSqlitePrebuild(path.join(root, "prebuilds/sqlite"));
  }
} else if (process.env.npm_lifecycle_event === "install" && !checkout) {
  const addon = spawnSync(process.execPath, [runner, "info"], { stdio: "ignore" }).status !== 2;
  if (run(process.execPath, [runner, "build", ...(addon ? ["--sqlite"] : [])]) !== 0) {
    console.warn("spmd-runner: the addon did not build; `spmd-runner build` says why");
  }
}
