// npm's `prepare`: after `npm ci` in a checkout, before `npm pack`, and (only where the user allows it: npm 11
// holds install scripts back) after installing the packed package.
//  - checkout: build the addon and the TypeScript; for `npm pack`, also put the addon where the package
//    carries it, prebuilds/<platform>-<arch>/, so an install needs neither a build nor install scripts.
//  - installed package: build the addon only when none loads here (none packed for this platform, or the
//    packed one misses a library such as this machine's libmpi).
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const runner = path.join(root, "runner/index.js");

function run(command, args, options = {}) {
  const p = spawnSync(command, args, { cwd: root, stdio: "inherit", ...options });
  if (p.status !== 0) process.exit(p.status ?? 1);
}

if (existsSync(path.join(root, "tsconfig.json"))) {
  run("npm", ["run", "build"]);
  if (process.env.npm_command === "pack") {
    const dir = path.join(root, "prebuilds", `${process.platform}-${process.arch}`);
    mkdirSync(dir, { recursive: true });
    copyFileSync(path.join(root, "native/build/Release/spmd_native.node"), path.join(dir, "spmd_native.node"));
  }
} else if (spawnSync(process.execPath, [runner, "info"], { stdio: "ignore" }).status === 2) {
  run(process.execPath, [runner, "build"]);
}
