// On a real terminal, as a person runs it: launches under a pseudo-terminal (util-linux `script`), where the
// progress bar draws. Elsewhere (pipes, CI logs) there is no bar, so only these tests see it.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { REPO, RUNNER } from "./helpers/ranks.js";
import { writeSlowSweep } from "./helpers/slow-sweep.js";

const T = { timeout: 60_000 };
const TABLE_HEAD = /# stage +op +algo +size/;
const HIDE_CURSOR = "\x1b[?25l";
const SHOW_CURSOR = "\x1b[?25h";
const STACK_TRACE = /\n\s+at |TypeError|index\.cjs:\d+/;

const quote = (arg) => `'${arg.replaceAll("'", "'\\''")}'`;

/** Runs `args` under a pseudo-terminal; resolves with its exit code and everything the terminal showed. */
export function onTerminal(args, env = {}) {
  // Outside CI, as a person's shell is: CI turns the bar off.
  const { CI: _ci, ...base } = process.env;
  const child = spawn("script", ["-qec", args.map(quote).join(" "), "/dev/null"], { cwd: REPO, env: { ...base, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let shown = "";
  child.stdout.on("data", (d) => (shown += d));
  child.stderr.on("data", (d) => (shown += d));
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, shown })));
}

function assertCursorBack(shown) {
  assert.ok(shown.lastIndexOf(SHOW_CURSOR) > shown.lastIndexOf(HIDE_CURSOR), "the cursor is shown again at the end");
}

function withSweep(fn) {
  return async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-tty-"));
    try {
      await fn(writeSlowSweep(dir), dir);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
}

test("a launch on a terminal draws the bar to 100%, prints the table and exits 0", T, withSweep(async (job, dir) => {
  const { code, shown } = await onTerminal([process.execPath, RUNNER, "launch", "-n", "2", job, "--out", dir]);
  assert.equal(code, 0, shown);
  assert.doesNotMatch(shown, STACK_TRACE);
  assert.match(shown, /steps \[.*\] 100% \| \d+\/\d+/);
  assert.match(shown, TABLE_HEAD);
  assertCursorBack(shown);
}));

test("a quiet launch on a terminal draws nothing, exits 0 and writes the table to the run directory", T, withSweep(async (job, dir) => {
  const { code, shown } = await onTerminal([process.execPath, RUNNER, "launch", "-n", "2", job, "--out", dir, "--quiet"]);
  assert.equal(code, 0, shown);
  assert.doesNotMatch(shown, STACK_TRACE);
  assert.doesNotMatch(shown, /steps \[/);
  assert.doesNotMatch(shown, TABLE_HEAD);
  const [run] = readdirSync(dir).filter((d) => d.startsWith("sweep-"));
  assert.match(readFileSync(path.join(dir, run, "table.txt"), "utf8"), TABLE_HEAD);
}));

test("a bar that cannot draw turns itself off in one line; the program goes on and gets its cursor back", T, async () => {
  // The terminal's width throws, as any fault in drawing would; the clock is moved past the bar's delay.
  const script = `
    const { progressBar } = await import(${JSON.stringify(new URL("../dist/report/progress.js", import.meta.url).href)});
    let now = Date.now();
    Date.now = () => now;
    Object.defineProperty(process.stderr, "columns", { get() { throw new Error("no width today"); } });
    const bar = progressBar();
    now += 3000;
    for (let step = 1; step <= 4; step++) bar.update(step, 4);
    bar.stop();
    console.log("the run went on");
  `;
  const { code, shown } = await onTerminal([process.execPath, "--input-type=module", "-e", script]);
  assert.equal(code, 0, shown);
  assert.doesNotMatch(shown, /\n\s+at /);
  assert.equal(shown.match(/progress bar off: no width today/g)?.length, 1, shown);
  assert.match(shown, /the run went on/);
  assertCursorBack(shown);
});
