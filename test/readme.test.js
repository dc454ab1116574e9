// The README kept true: the fenced blocks marked `<!-- readme-check: NAME -->` are compared with what the
// command really prints (numbers and the host name aside, `...` standing for any lines), and the facts it
// states are checked against the code: result keys, the manifest's `git`, exit codes, the package's size and
// files (every link it makes), and a moved checkout's build.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { gzipSync } from "node:zlib";
import { REPO, RUNNER, envForMpi, runNode } from "./helpers/ranks.js";

const README = readFileSync(path.join(REPO, "README.md"), "utf8");
const TMP = mkdtempSync(path.join(os.tmpdir(), "spmd-readme-"));

/** The README's checked blocks by name: the lines of the fenced block after each marker. */
function checkedBlocks() {
  const blocks = {};
  for (const m of README.matchAll(/<!-- readme-check: ([^>]+?) -->\n```[^\n]*\n([\s\S]*?)\n```/g)) blocks[m[1]] = m[2].split("\n");
  return blocks;
}

/** A line as compared: numbers and the host name masked, runs of blanks as one; rows cut to `rowTokens`. */
function shape(line, rowTokens) {
  let tokens = line.trim().split(/\s+/).map((t) => (/^-?\d+(\.\d+)?(e[-+]\d+)?$/.test(t) ? "N" : t));
  const host = tokens.indexOf("host:");
  if (host >= 0) tokens[host + 1] = "HOST";
  if (rowTokens && line.startsWith("  ")) tokens = tokens.slice(0, rowTokens);
  return tokens.join(" ");
}

/** Every line of `block` is in `actual`, in order: consecutive unless a `...` line lets lines pass between. */
function assertSameShape(block, actual, rowTokens) {
  let at = 0, skipping = false;
  for (const want of block) {
    if (want.trim() === "...") {
      skipping = true;
      continue;
    }
    const found = actual.findIndex((l, i) => i >= at && shape(l, rowTokens) === shape(want, rowTokens));
    assert.ok(found >= 0 && (skipping || found === at), `README line not printed ${skipping ? "" : "next "}(after line ${at} of the output):\n${want}\n--- output:\n${actual.join("\n")}`);
    at = found + 1;
    skipping = false;
  }
}

const runs = [];

before(async () => {
  // `npm start` is the quick start's command; the runs go to a directory of their own.
  assert.equal(JSON.parse(readFileSync(path.join(REPO, "package.json"), "utf8")).scripts.start, "node runner launch -n 4 jobs/quickstart.json");
  for (let i = 0; i < 2; i++) {
    const p = await runNode([RUNNER, "launch", "-n", "4", "jobs/quickstart.json", "--out", TMP]);
    assert.equal(p.code, 0, p.stderr);
    runs.push(p.stdout);
  }
});

after(() => rmSync(TMP, { recursive: true, force: true }));

const results = () => readdirSync(TMP).filter((d) => d.startsWith("quickstart-")).sort().map((d) => path.join(TMP, d, "results.json"));

test("README: the quick start's table is what `npm start` prints", () => {
  assertSameShape(checkedBlocks()["npm start"], runs[0].trimEnd().split("\n"));
});

test("README: the compare sample is what comparing two quick-start runs prints", async () => {
  const [a, b] = results();
  const p = await runNode([RUNNER, "compare", a, b]);
  assert.equal(p.code, 0, p.stdout + p.stderr);
  // Up to B/A: the verdicts are the run's own, and so are the counts the summary adds after the regressions (a
  // slow spell in one of two runs marks rows "slower?", a machine that changed between them "machine differed").
  const printed = p.stdout.trimEnd().split("\n").map((l) => l.replace(/^(# \d+ regressions? \(threshold [\d.]+%\)); .*$/, "$1"));
  assertSameShape(checkedBlocks().compare, printed, 8);
});

test("README: results.json's `time` keys and the manifest's `git` are as the README names them", () => {
  const doc = JSON.parse(readFileSync(results()[0], "utf8"));
  const named = README.match(/\(`time`: ([^)]*?), the slowest rank's per iteration\)/)?.[1].split(", ").map((k) => k.replaceAll("`", ""));
  for (const row of doc.results) assert.deepEqual(Object.keys(row.time), named);
  assert.match(README, /`git`: its\n`git describe --always --dirty --abbrev=40`/);
  const checkout = existsSync(path.join(REPO, ".git"));
  if (checkout) assert.match(doc.manifest.git, /^[0-9a-f]{40}(-dirty)?$/);
  else assert.equal(doc.manifest.git, null);
});

test("README: an environment that contradicts the launcher is bad input, exit 2", async (t) => {
  assert.match(README, /Exit codes: 0 success; 1 a run failure or a checked element was wrong; 2 bad input \(job, config, flags,\nenvironment,/);
  const env = { OMPI_COMM_WORLD_RANK: "0", OMPI_COMM_WORLD_SIZE: "2", OMPI_COMM_WORLD_LOCAL_RANK: "0", OMPI_COMM_WORLD_LOCAL_SIZE: "2" };
  if (!/\bmpi=built\b/.test(spawnSync(process.execPath, [RUNNER, "info"], { cwd: REPO, encoding: "utf8" }).stdout)) return t.skip("the addon was built without MPI");
  // Open MPI's variables without mpirun: MPI starts a world of 1 where the environment says 2.
  const p = spawnSync(process.execPath, [RUNNER, "jobs/quickstart.json"], { cwd: REPO, env: { ...envForMpi(), ...env }, encoding: "utf8", timeout: 60_000 });
  assert.equal(p.status, 2, p.stderr);
  assert.match(p.stderr, /MPI says rank 0 of 1/);
});

test("README: every relative link stays inside the repository and is in the package; the package's size is the README's", () => {
  const links = [...README.matchAll(/\]\(([^)#\s]+)(#[^)]*)?\)/g)].map((m) => m[1]).filter((l) => !/^[a-z]+:/.test(l));
  assert.ok(links.includes("docs/DESIGN.md"), "links docs/DESIGN.md");
  const pack = spawnSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: REPO, encoding: "utf8", maxBuffer: 64 << 20 });
  assert.equal(pack.status, 0, pack.stderr);
  const [info] = JSON.parse(pack.stdout);
  const files = new Set(info.files.map((f) => f.path));
  for (const link of links) {
    assert.ok(!path.normalize(link).startsWith(".."), `${link} points outside the repository`);
    assert.ok(existsSync(path.join(REPO, link)), `${link} does not exist`);
    assert.ok(files.has(path.normalize(link)), `${link} is not in the package`);
  }
  // The dry run leaves out the addon that `npm pack` copies into prebuilds/: add it, compressed as npm would.
  const addon = path.join(REPO, "native/build/Release/spmd_native.node");
  const packed = info.size + gzipSync(readFileSync(addon)).length, unpacked = info.unpackedSize + statSync(addon).size;
  const [, mb, unpackedMb] = README.match(/The package \(about ([\d.]+) MB, ([\d.]+) MB unpacked\)/).map(Number);
  assert.ok(Math.abs(packed / 1e6 - mb) / mb < 0.1, `the package is ${(packed / 1e6).toFixed(1)} MB, the README says ${mb}`);
  assert.ok(Math.abs(unpacked / 1e6 - unpackedMb) / unpackedMb < 0.1, `it unpacks to ${(unpacked / 1e6).toFixed(1)} MB, the README says ${unpackedMb}`);
});

test("README: a checkout moved since its last build configures afresh (its CMakeCache.txt names the old paths)", async (t) => {
  if (spawnSync("cmake", ["--version"]).status !== 0) return t.skip("cmake not installed");
  const { forgetMovedCache } = await import("../dist/build/addon.js");
  const [before, moved] = [path.join(TMP, "checkout"), path.join(TMP, "moved")];
  mkdirSync(path.join(before, "native"), { recursive: true });
  writeFileSync(path.join(before, "native/CMakeLists.txt"), "cmake_minimum_required(VERSION 3.16)\nproject(moved NONE)\n");
  const configure = (root) => spawnSync("cmake", ["-S", path.join(root, "native"), "-B", path.join(root, "native/build")], { encoding: "utf8" });
  assert.equal(configure(before).status, 0);
  assert.equal(forgetMovedCache(path.join(before, "native/build"), path.join(before, "native")), undefined, "a cache that fits stays");
  renameSync(before, moved);
  assert.notEqual(configure(moved).status, 0, "CMake refuses the moved cache");
  assert.equal(forgetMovedCache(path.join(moved, "native/build"), path.join(moved, "native")), path.join(before, "native"));
  const again = configure(moved);
  assert.equal(again.status, 0, again.stderr);
});
