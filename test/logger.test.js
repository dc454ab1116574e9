// The run's logger (src/log/logger.ts): what each rank's console and log file take, and that a rank whose
// lines no transport takes never loads winston (some 40 ms of CPU at every rank's start, issue #21).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { pathToFileURL } from "node:url";
import { REPO } from "./helpers/ranks.js";
import { withTempDir } from "./helpers/tmp.js";

const LOGGER = pathToFileURL(path.join(REPO, "dist/log/logger.js")).href;

const LEVELS = ["error", "warn", "info", "debug"];

/**
 * Logs a line at each of `levels` through a logger made with `options` (after `addFile(file)`, where given),
 * in a fresh process; returns its stderr lines, isDebugEnabled() and whether winston was loaded.
 */
function logEach(options, { file, levels = LEVELS } = {}) {
  const script = `
    import { createRequire } from "node:module";
    const { createLogger } = await import(${JSON.stringify(LOGGER)});
    const log = createLogger(${JSON.stringify(options)});
    ${file ? `await log.addFile(${JSON.stringify(file)});` : ""}
    for (const level of ${JSON.stringify(levels)}) log[level](level + " line");
    const debug = log.isDebugEnabled();
    await log.close();
    const winston = Object.keys(createRequire(import.meta.url).cache).some((f) => f.includes("/node_modules/winston/"));
    console.log(JSON.stringify({ debug, winston }));`;
  const p = spawnSync(process.execPath, ["--input-type=module", "-e", script], { cwd: REPO, encoding: "utf8" });
  assert.equal(p.status, 0, p.stderr);
  return { ...JSON.parse(p.stdout), stderr: p.stderr.split("\n").filter(Boolean) };
}

test("rank 0 logs at its level; the other ranks log errors only, and at every level with allRanks", () => {
  const rank0 = logEach({ rank: 0, level: "info", allRanks: false });
  assert.deepEqual(rank0.stderr, ["[rank 0] error: error line", "[rank 0] warn: warn line", "[rank 0] info: info line"]);
  assert.equal(rank0.debug, false);
  assert.deepEqual(logEach({ rank: 3, level: "debug", allRanks: false }).stderr, ["[rank 3] error: error line"]);
  const all = logEach({ rank: 3, level: "debug", allRanks: true });
  assert.equal(all.stderr.length, 4);
  assert.equal(all.debug, true);
});

test("a rank whose lines no transport takes never loads winston; one that logs an error does", () => {
  const quiet = logEach({ rank: 1, level: "error", allRanks: false });
  assert.deepEqual(quiet.stderr, ["[rank 1] error: error line"]);
  assert.equal(quiet.winston, true, "an error is logged through winston");
  const info = logEach({ rank: 1, level: "debug", allRanks: false }, { levels: ["warn", "info", "debug"] });
  assert.deepEqual(info.stderr, []);
  assert.equal(info.winston, false, "winston was loaded for lines no transport takes");
});

test("a log file takes every line at the logger's level, on every rank, as JSON lines", async () => {
  await withTempDir("spmd-log-", (dir) => {
    const file = path.join(dir, "rank1.log.jsonl");
    const r = logEach({ rank: 1, level: "info", allRanks: false }, { file });
    assert.deepEqual(r.stderr, ["[rank 1] error: error line"]);
    const lines = readFileSync(file, "utf8").trim().split("\n").map((l) => JSON.parse(l));
    assert.deepEqual(lines.map((l) => [l.level, l.message, l.rank]), [["error", "error line", 1], ["warn", "warn line", 1], ["info", "info line", 1]]);
  });
});
