#!/usr/bin/env node
// `node runner ...`: the built CLI, bundled into one file (npm ci builds dist/bundle/, scripts/bundle.mjs).
// `--version` alone is answered here, without loading the bundle: scripts ask for it often.
import { readFileSync } from "node:fs";

if (process.argv.length === 3 && process.argv[2] === "--version") {
  console.log(JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")).version);
} else {
  await import("../dist/bundle/index.js");
}
