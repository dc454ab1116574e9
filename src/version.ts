import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The package's root, in a checkout or installed: the nearest directory above this module with the
 * package's package.json. Found rather than written as a relative path, because this code runs both as
 * dist/'s modules and from the one-file bundle of the rank path (dist/bundle/), at other depths.
 */
function findRoot(): string {
  for (let dir = path.dirname(fileURLToPath(import.meta.url)); ; dir = path.dirname(dir)) {
    const manifest = path.join(dir, "package.json");
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, "utf8")) as { name?: string }).name === "spmd-runner") return dir;
    if (path.dirname(dir) === dir) throw new Error(`spmd-runner: no package.json above ${fileURLToPath(import.meta.url)}`);
  }
}

export const PACKAGE_ROOT = findRoot();
export const VERSION: string = (JSON.parse(readFileSync(path.join(PACKAGE_ROOT, "package.json"), "utf8")) as { version: string }).version;
