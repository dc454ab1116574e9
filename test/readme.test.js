// The README and the guides in docs/ kept true: the fenced blocks marked `<!-- readme-check: NAME -->` are
// compared with what the command really prints (numbers and the host name aside, `...` standing for any
// lines); every runner command their shell blocks show names flags its command has (docs/cli.md, which
// test/docs.test.js keeps the code's) and files the checkout has, and the cheap ones run as written; and the
// facts they state are checked against the code: result keys, the manifest's `git`, exit codes, the
// package's size and files (every link they make), and a moved checkout's build.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { gzipSync } from "node:zlib";
import { REPO, RUNNER, envForMpi, runNode } from "./helpers/ranks.js";

const README = readFileSync(path.join(REPO, "README.md"), "utf8");
/** The generated references are checked by test/docs.test.js; PERFORMANCE.md's commands are the benches'. */
const GENERATED = new Set(["cli.md", "job-format.md"]);
/** The README and every hand-written page of docs/, by path. */
const PAGES = new Map([
  ["README.md", README],
  ...readdirSync(path.join(REPO, "docs")).filter((f) => f.endsWith(".md") && !GENERATED.has(f)).map((f) => [`docs/${f}`, readFileSync(path.join(REPO, "docs", f), "utf8")]),
]);
/** Where a fact moved between pages, its sentence is found in any of them (line breaks as blanks). */
const ALL = [...PAGES.values()].join("\n").replace(/\s+/g, " ");
const TMP = mkdtempSync(path.join(os.tmpdir(), "spmd-readme-"));

/** The pages' checked blocks by name: the lines of the fenced block after each marker. */
function checkedBlocks() {
  const blocks = {};
  for (const text of PAGES.values()) {
    for (const m of text.matchAll(/<!-- readme-check: ([^>]+?) -->\n```[^\n]*\n([\s\S]*?)\n```/g)) blocks[m[1]] = m[2].split("\n");
  }
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

test("README: the quick start is two commands, npm start's and the one .ci/run runs, each with how long it takes", () => {
  const quick = README.match(/## Quick start[\s\S]*?```sh\n([\s\S]*?)\n```/)[1].split("\n").filter((l) => !/^\s/.test(l));
  assert.deepEqual(quick.map((l) => l.replace(/\s+#.*$/, "")), ["npm ci && npm start", "npm test"]);
  assert.match(quick[0], /npm ci: about [\d.]+ min/);
  assert.match(quick[1], /about [\d–-]+ min/);
  const ci = readFileSync(path.join(REPO, ".ci/run"), "utf8").trimEnd().split("\n");
  assert.deepEqual(ci.slice(-2), ["npm ci --no-audit --no-fund", "npm test"], ".ci/run ends with the README's commands");
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

test("README: results.json's `time` keys and the manifest's `git` are as the docs name them", () => {
  const doc = JSON.parse(readFileSync(results()[0], "utf8"));
  const named = ALL.match(/\(`time`: ([^)]*?), the slowest rank's per iteration\)/)?.[1].split(", ").map((k) => k.replaceAll("`", ""));
  for (const row of doc.results) assert.deepEqual(Object.keys(row.time), named);
  assert.match(ALL, /`git`: its `git describe --always --dirty --abbrev=40`/);
  const checkout = existsSync(path.join(REPO, ".git"));
  if (checkout) assert.match(doc.manifest.git, /^[0-9a-f]{40}(-dirty)?$/);
  else assert.equal(doc.manifest.git, null);
});

test("README: an environment that contradicts the launcher is bad input, exit 2", async (t) => {
  assert.match(README.replace(/\s+/g, " "), /## Exit codes 0 success; 1 a run failure or a checked element was wrong; 2 bad input \(job, config, flags, environment,/);
  const env = { OMPI_COMM_WORLD_RANK: "0", OMPI_COMM_WORLD_SIZE: "2", OMPI_COMM_WORLD_LOCAL_RANK: "0", OMPI_COMM_WORLD_LOCAL_SIZE: "2" };
  if (!/\bmpi=built\b/.test(spawnSync(process.execPath, [RUNNER, "info"], { cwd: REPO, encoding: "utf8" }).stdout)) return t.skip("the addon was built without MPI");
  // Open MPI's variables without mpirun: MPI starts a world of 1 where the environment says 2.
  const p = spawnSync(process.execPath, [RUNNER, "jobs/quickstart.json"], { cwd: REPO, env: { ...envForMpi(), ...env }, encoding: "utf8", timeout: 60_000 });
  assert.equal(p.status, 2, p.stderr);
  assert.match(p.stderr, /MPI says rank 0 of 1/);
});

test("README: every relative link of the pages stays inside the repository and is in the package; the package's size is docs/install.md's", () => {
  // Each link as a path from the repository's root: docs/ pages link from docs/.
  const links = [...PAGES].flatMap(([page, text]) => [...text.matchAll(/\]\(([^)#\s]+)(#[^)]*)?\)/g)]
    .map((m) => m[1]).filter((l) => !/^[a-z]+:/.test(l)).map((l) => path.normalize(path.join(path.dirname(page), l))));
  for (const page of ["docs/README.md", "docs/DESIGN.md", "docs/cli.md", "docs/job-format.md"]) assert.ok(links.includes(page), `README links ${page}`);
  // A link to a heading (`mpi.md#the-mpi-backend-under-mpirun`) names one the page has, as GitHub spells it.
  const slug = (heading) => heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-");
  for (const [page, text] of PAGES) {
    for (const [, target, anchor] of text.matchAll(/\]\(([^)#\s]*)#([^)\s]+)\)/g)) {
      const file = target ? path.join(REPO, path.dirname(page), target) : path.join(REPO, page);
      if (!file.endsWith(".md")) continue;
      const headings = [...readFileSync(file, "utf8").matchAll(/^#+ (.*)$/gm)].map((m) => slug(m[1]));
      assert.ok(headings.includes(anchor), `${page}: ${target}#${anchor}: no such heading`);
    }
  }
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
  const [, mb, unpackedMb] = PAGES.get("docs/install.md").match(/The package \(about ([\d.]+) MB, ([\d.]+) MB unpacked\)/).map(Number);
  assert.ok(Math.abs(packed / 1e6 - mb) / mb < 0.1, `the package is ${(packed / 1e6).toFixed(1)} MB, docs/install.md says ${mb}`);
  assert.ok(Math.abs(unpacked / 1e6 - unpackedMb) / unpackedMb < 0.1, `it unpacks to ${(unpacked / 1e6).toFixed(1)} MB, docs/install.md says ${unpackedMb}`);
});

/** docs/cli.md's flags by command ("runner exp run" → Set {"--dir", ...}), from each section's Options. */
function flagsByCommand() {
  const cli = readFileSync(path.join(REPO, "docs/cli.md"), "utf8");
  const flags = new Map();
  for (const [, name, help] of cli.matchAll(/^## (runner[^\n]*)\n\n```text\n([\s\S]*?)\n```/gm)) {
    // Every group of options ("Options:", "Passed on to every rank's run:"), not the examples or subcommands.
    const options = help.split("\n\n").filter((p) => /^[^\n]*:\n/.test(p) && !/^(Examples|Commands):/.test(p)).join("\n");
    flags.set(name, new Set([...options.matchAll(/^ {2,6}(-[\w-]+)(?:, (--[\w-]+))?/gm)].flatMap((m) => m.slice(1)).filter(Boolean)));
  }
  return flags;
}

/** Paths into the checkout that a shown command names (an argument, not an output it writes). */
const CHECKOUT_PATH = /^(jobs|experiments|traces|configs|scripts|bench|schema)\//;

/**
 * Every command line of the pages' shell blocks, as [page, line, words]: comments cut, `&&` chains split, the
 * blocks after `<!-- docs-check: skip WHY -->` left out (columns side by side, a session's transcript).
 */
function shownCommands() {
  const shown = [];
  for (const [page, text] of PAGES) {
    for (const m of text.matchAll(/(<!-- docs-check: skip [^>]+-->\n)?```(sh|bash)?\n([\s\S]*?)\n```/g)) {
      if (m[1] || (m[2] === undefined && !/^(node|npm|mpirun|srun|sbatch|spmd-runner) /m.test(m[3]))) continue;
      for (const raw of m[3].split("\n")) {
        for (const line of raw.replace(/\s#\s.*$/, "").split("&&").map((l) => l.trim())) {
          if (line && !line.startsWith("#")) shown.push([page, line, line.match(/"[^"]*"|'[^']*'|\S+/g)]);
        }
      }
    }
  }
  return shown;
}

/** The runner's words of a command line (after `node runner` or `spmd-runner`), or undefined. */
function runnerWords(words) {
  const at = words.findIndex((w, i) => (w === "runner" && words[i - 1] === "node") || w === "spmd-runner");
  return at < 0 ? undefined : words.slice(at + 1);
}

test("README and docs: every runner command shown names flags its command has and files the checkout has", () => {
  const flags = flagsByCommand(), scripts = JSON.parse(readFileSync(path.join(REPO, "package.json"), "utf8")).scripts;
  const wrong = [];
  let runnerLines = 0;
  for (const [page, line, words] of shownCommands()) {
    for (const w of words.filter((w) => CHECKOUT_PATH.test(w) && !/[A-Z]{2,}|\.\.\.|[<[]/.test(w))) {
      if (!existsSync(path.join(REPO, w))) wrong.push(`${page}: ${line}: ${w} is not in the checkout`);
    }
    if (words[0] === "npm" && words[1] === "run" && !(words[2] in scripts)) wrong.push(`${page}: ${line}: no npm script ${words[2]}`);
    const argv = runnerWords(words);
    if (!argv) continue;
    runnerLines++;
    // The command is the longest run of leading words that docs/cli.md has a section for; else the default.
    let command = "runner";
    for (let i = 1; i <= argv.length && flags.has(["runner", ...argv.slice(0, i)].join(" ")); i++) command = ["runner", ...argv.slice(0, i)].join(" ");
    for (const flag of argv.map((w) => w.replace(/^\[/, "").split("=")[0]).filter((w) => /^--?[A-Za-z]/.test(w))) {
      if (!flags.get(command).has(flag)) wrong.push(`${page}: ${line}: ${command} has no ${flag}`);
    }
  }
  assert.ok(runnerLines >= 30, `only ${runnerLines} runner commands found in the pages' shell blocks`);
  assert.deepEqual(wrong, []);
});

test("README and docs: the shown commands that are cheap and write nothing run as written", async () => {
  const cheap = shownCommands().filter(([, , words]) => {
    const argv = runnerWords(words);
    return words[0] === "node" && argv && ["validate", "info"].includes(argv[0]) && !argv.some((w) => /[A-Z]{2,}|[<[]|\.\.\./.test(w));
  });
  assert.ok(cheap.length >= 2, "the README shows validate and info");
  for (const [page, line, words] of cheap) {
    const p = await runNode(words.slice(1));
    assert.equal(p.code, 0, `${page}: ${line}: exit ${p.code}\n${p.stderr}`);
  }
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
