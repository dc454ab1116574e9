// The layers of the house (docs/ARCHITECTURE.md). Native floors: every folder of native/src belongs to one floor, a file includes
// only its own floor and those below it, and no two folders include each other, however indirectly. The
// build enforces the first rule per floor (native/cmake/spmd_floors.cmake); this test names every offender,
// and also catches cycles between the folders of one floor (kernels/ <-> kernels/cpu/), which the build cannot.
// TypeScript: no two top-level folders of src/ (or top-level modules, such as results.ts) import each other,
// however indirectly.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { spawnSync } from "node:child_process";
import os from "node:os";
import { test } from "node:test";
import { REPO } from "./helpers/ranks.js";

const SRC = path.join(REPO, "native/src");
// Bottom to top, as native/cmake/spmd_floors.cmake lists them.
const FLOORS = ["base", "kernels", "algorithms", "estimating", "runtime", "backends", "addon"];
const SOURCE = /\.(h|cc|cu|cuh)$/;

function sources(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return sources(p);
    return SOURCE.test(e.name) ? [p] : [];
  });
}

// [{ file, folder, target, targetFolder }] for every quoted include of a file under native/src.
function includes(src = SRC) {
  return sources(src).flatMap((file) => {
    const rel = path.relative(src, file);
    const text = fs.readFileSync(file, "utf8");
    return [...text.matchAll(/^\s*#\s*include\s+"([^"]+)"/gm)]
      .map((m) => m[1])
      .filter((target) => fs.existsSync(path.join(src, target)))
      .map((target) => ({ file: rel, folder: path.dirname(rel), target, targetFolder: path.dirname(target) }));
  });
}

// The folders that lie on a cycle of the folder graph, as strongly connected components of two or more.
function folderCycles(edges) {
  const graph = new Map();
  for (const { folder, targetFolder } of edges) {
    if (!graph.has(folder)) graph.set(folder, new Set());
    if (!graph.has(targetFolder)) graph.set(targetFolder, new Set());
    if (folder !== targetFolder) graph.get(folder).add(targetFolder);
  }
  // Tarjan's algorithm; the graph has a few dozen nodes, so recursion depth is no concern.
  const index = new Map(), low = new Map(), stack = [], onStack = new Set(), cycles = [];
  const visit = (v) => {
    index.set(v, index.size);
    low.set(v, index.get(v));
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v)) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), index.get(w)));
    }
    if (low.get(v) !== index.get(v)) return;
    const component = [];
    let w;
    do {
      w = stack.pop();
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1) cycles.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return cycles;
}

const floorOf = (folder) => FLOORS.indexOf(folder.split(path.sep)[0]);

test("every native/src folder is one of the floors", () => {
  const unknown = fs.readdirSync(SRC).filter((d) => fs.statSync(path.join(SRC, d)).isDirectory() && !FLOORS.includes(d));
  assert.deepEqual(unknown, []);
});

test("no native file includes a floor above its own", () => {
  const upward = includes()
    .filter((e) => floorOf(e.targetFolder) > floorOf(e.folder))
    .map((e) => `${e.file} includes ${e.target}`);
  assert.deepEqual(upward, []);
});

test("no include cycle between native folders", () => {
  assert.deepEqual(folderCycles(includes()), []);
});

test("the cycle check finds a cycle through three folders, and none in a chain", () => {
  const edge = (folder, targetFolder) => ({ folder, targetFolder });
  assert.deepEqual(folderCycles([edge("a", "b"), edge("b", "c"), edge("c", "a"), edge("c", "d")]), [["a", "b", "c"]]);
  assert.deepEqual(folderCycles([edge("a", "b"), edge("b", "c"), edge("a", "c"), edge("a", "a")]), []);
});

// The build's own check (native/cmake/check_floors.cmake, run before the lowest floor compiles).
function buildCheck(src) {
  const floors = `-DFLOORS=${FLOORS.join(";")}`;
  return spawnSync("cmake", [`-DSRC=${src}`, floors, "-P", path.join(REPO, "native/cmake/check_floors.cmake")], { encoding: "utf8" });
}

test("the build's floor check passes the tree and fails an upward include, naming it", () => {
  assert.equal(buildCheck(SRC).status, 0, buildCheck(SRC).stderr);
  const copy = fs.mkdtempSync(path.join(os.tmpdir(), "spmd-floors-"));
  try {
    fs.cpSync(SRC, copy, { recursive: true });
    fs.appendFileSync(path.join(copy, "base/partition.h"), '#include "runtime/executor.h"\n');
    const p = buildCheck(copy);
    assert.notEqual(p.status, 0);
    assert.match(p.stderr, /base\/partition\.h: #include "runtime\/executor\.h"/);
  } finally {
    fs.rmSync(copy, { recursive: true, force: true });
  }
});

// [{ folder, targetFolder }] for every relative import of src/: a folder is the top-level one (cli/commands
// is cli), a top-level file is its own.
function imports(src = path.join(REPO, "src")) {
  const top = (file) => {
    const parts = path.relative(src, file).split(path.sep);
    return parts.length > 1 ? parts[0] : parts[0].replace(/\.[jt]s$/, "");
  };
  const files = (dir) => fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(path.join(dir, e.name)) : e.name.endsWith(".ts") ? [path.join(dir, e.name)] : []);
  return files(src).flatMap((file) =>
    [...fs.readFileSync(file, "utf8").matchAll(/from "(\.[^"]+)"/g)]
      .map((m) => ({ folder: top(file), targetFolder: top(path.resolve(path.dirname(file), m[1])) })));
}

test("no import cycle between src/ folders", () => {
  const edges = imports();
  assert.ok(edges.some((e) => e.folder === "metrics" && e.targetFolder === "results"), "the edges are read");
  assert.deepEqual(folderCycles(edges), []);
});
