#!/usr/bin/env node
// `node runner ...`: the built CLI, bundled into one file and compiled from its code cache (runner/bundle.js;
// npm ci builds dist/bundle/, scripts/bundle.mjs). `--version` alone is answered here, without loading the
// bundle: scripts ask for it often.
import { readFileSync } from "node:fs";

if (process.argv.length === 3 && process.argv[2] === "--version") {
  console.log(JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")).version);
} else {
  const { loadBundle } = await import("./bundle.js");
  await loadBundle().exports.main();
}
