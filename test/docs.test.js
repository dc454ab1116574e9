// The generated references (docs/cli.md, docs/job-format.md) are what scripts/gen-docs.mjs makes of the built
// runner's --help and the exported schemas: a command, option or field changed without re-running it fails here.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { TARGETS } from "../scripts/gen-docs.mjs";
import { REPO } from "./helpers/ranks.js";

for (const [file, make] of Object.entries(TARGETS)) {
  test(`${file} is what node scripts/gen-docs.mjs generates from the code`, () => {
    const committed = readFileSync(path.join(REPO, file), "utf8").split("\n"), generated = make().split("\n");
    const at = generated.findIndex((line, i) => line !== committed[i]);
    assert.ok(at < 0 && committed.length === generated.length, `${file} line ${at + 1} differs from the code's (${JSON.stringify(generated[at])}): run node scripts/gen-docs.mjs`);
  });
}
