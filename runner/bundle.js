// The rank path's bundle (dist/bundle/index.cjs, scripts/bundle.mjs), compiled from V8's code cache beside it.
// Every rank of every job compiles the same 0.75 MB of JavaScript at start-up; with the cache V8 reads the
// compiled code instead, some 40 ms of a rank's CPU (0.3 s with a core to itself). Node 20 caches no ES
// modules (module.enableCompileCache is Node 22's), so the bundle is CommonJS, run as Node's loader would run it.
// The build writes the cache (`saveCache`) after evaluating the bundle's modules, so it holds the code their
// initialisation compiled too.
import { createHash } from "node:crypto";
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import Module, { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import vm from "node:vm";

export const BUNDLE = fileURLToPath(new URL("../dist/bundle/index.cjs", import.meta.url));

/** V8 checks a cache against the source's length only: the file starts with the source's digest. */
const DIGEST_BYTES = 32;
const cacheFile = (file) => `${file}.v8cache`;

function readCache(file, digest) {
  try {
    const cache = readFileSync(cacheFile(file));
    return cache.subarray(0, DIGEST_BYTES).equals(digest) ? cache.subarray(DIGEST_BYTES) : undefined;
  } catch {
    return undefined; // none built (or unreadable): compiled from source, as any module is
  }
}

/**
 * Evaluates the bundle `file` and returns its exports; `cached` says whether V8 took the code cache, and
 * `saveCache` writes one from what has been compiled so far (by a rename: ranks may be starting from it).
 */
export function loadBundle(file = BUNDLE) {
  const bytes = readFileSync(file);
  const digest = createHash("sha256").update(bytes).digest();
  const source = bytes.toString("utf8");
  const cachedData = readCache(file, digest);
  const script = new vm.Script(Module.wrap(source), { filename: file, cachedData });
  const module = { exports: {} };
  script.runInThisContext().call(module.exports, module.exports, createRequire(file), module, file, path.dirname(file));
  return {
    exports: module.exports,
    cached: cachedData !== undefined && !script.cachedDataRejected,
    saveCache() {
      writeFileSync(`${cacheFile(file)}.tmp`, Buffer.concat([digest, script.createCachedData()]));
      renameSync(`${cacheFile(file)}.tmp`, cacheFile(file));
    },
  };
}
