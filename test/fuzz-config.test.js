// Hostile input to the job loader, property-based (fast-check): random JSON values, valid jobs mutated at
// random places, random bytes and deep nesting. Every input is either accepted (and then plans) or
// rejected with a one-line ConfigError naming the file; nothing else may escape, and nothing may hang.
// Runs are bounded so CI stays fast; a failure prints the seed and the shrunk input to replay it.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import fc from "fast-check";
import { ConfigError } from "../dist/config/errors.js";
import { parseJob, parseRunConfig } from "../dist/config/load.js";
import { plan } from "../dist/graph/plan.js";
import { sweepPoints } from "../dist/graph/sweep.js";
import { validateGraph } from "../dist/graph/validate.js";
import { REPO, RUNNER, runNode } from "./helpers/ranks.js";

const FILE = "job.json";
const RUNS = { numRuns: 400 };
const VALID = ["jobs/quickstart.json", "jobs/onebit.json"].map((f) => JSON.parse(readFileSync(path.join(REPO, f), "utf8")));

/** Loads `text` as `runner validate` would; returns "accepted" or the ConfigError's message. */
function load(text, worldSize) {
  try {
    const job = parseJob(text, FILE);
    validateGraph(job, FILE, worldSize);
    const points = sweepPoints(job);
    for (const point of [points[0], points.at(-1)]) plan(job, { size: worldSize, hostOf: Array(worldSize).fill(0) }, point);
    return "accepted";
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    assert.ok(!err.message.includes("\n"), `one line: ${err.message}`);
    assert.ok(err.message.startsWith(`${FILE}: `), `names the file: ${err.message}`);
    assert.ok(err.message.length < 400, `short: ${err.message}`);
    return err.message;
  }
}

// Values chosen to sit on the edges the schemas draw: sizes, integers, names, prototype keys.
const edgeValue = fc.constantFrom(
  -1, 0, 0.5, 1, 2 ** 31, 2 ** 40, 2 ** 40 + 1, 2 ** 53, 1e308, -1e308, Number.MIN_VALUE,
  "", "0", "4Ki", "1.5Ki", "1.0001Ki", "16Mi", "4Qi", "1e3", "-1", "99999999999999999999Ti",
  "sum", "mean", "auto", "ring", "float32", "bfloat16", "int64", "__proto__", "constructor", "toString",
  null, true, false, [], {}, [0], { kind: "rank" }, { from: 1, to: 2 ** 40, factor: 1.0000001 },
);
const anyValue = fc.oneof(fc.jsonValue({ maxDepth: 3 }), edgeValue, fc.string({ maxLength: 40 }));
const anyKey = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.constantFrom("__proto__", "constructor", "prototype", "hasOwnProperty", "$schema", "sweep", "after", "inputs", "root", "count"),
);

/** Every node of a JSON value with its parent and key (the root has none). */
function nodes(value, parent = undefined, key = undefined, out = []) {
  out.push({ value, parent, key });
  if (value && typeof value === "object") for (const k of Object.keys(value)) nodes(value[k], value, Array.isArray(value) ? Number(k) : k, out);
  return out;
}

// Own data properties even for "__proto__", as JSON.parse would create them.
function put(obj, key, value) {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

const mutation = fc.oneof(
  fc.record({ kind: fc.constant("set"), at: fc.nat(), value: anyValue }),
  fc.record({ kind: fc.constant("delete"), at: fc.nat() }),
  fc.record({ kind: fc.constant("add"), at: fc.nat(), key: anyKey, value: anyValue }),
  fc.record({ kind: fc.constant("copy"), at: fc.nat(), to: fc.nat() }),
);

// Places a copy of each value: fast-check hands one object to several mutations and to later runs (edgeValue's
// constants), and placing it twice let a later "add" put {} inside itself; JSON.stringify then threw, in that run
// and, since the constant itself had changed, in every later property that drew it.
function mutate(job, mutations) {
  const root = structuredClone(job);
  for (const m of mutations) {
    const all = nodes(root);
    const target = all[m.at % all.length];
    const value = structuredClone(m.value);
    if (m.kind === "add" && target.value && typeof target.value === "object" && !Array.isArray(target.value)) put(target.value, m.key, value);
    if (!target.parent) continue; // the root itself stays an object: other mutations cover the rest
    if (m.kind === "set") put(target.parent, target.key, value);
    if (m.kind === "delete") Array.isArray(target.parent) ? target.parent.splice(target.key, 1) : delete target.parent[target.key];
    // A subtree copied elsewhere: duplicate stage ids, a tensor where a stage belongs, ...
    if (m.kind === "copy") {
      const dest = all[m.to % all.length];
      if (dest.parent) put(dest.parent, dest.key, structuredClone(target.value));
    }
  }
  return JSON.stringify(root);
}

const worldSize = fc.integer({ min: 1, max: 64 });

test("random JSON values are accepted or rejected with one line", () => {
  fc.assert(fc.property(fc.jsonValue({ maxDepth: 6 }), worldSize, (v, w) => void load(JSON.stringify(v) ?? "null", w)), RUNS);
});

test("valid jobs mutated at random places are accepted or rejected with one line", () => {
  const job = fc.constantFrom(...VALID);
  fc.assert(fc.property(job, fc.array(mutation, { minLength: 1, maxLength: 4 }), worldSize, (j, ms, w) => void load(mutate(j, ms), w)), {
    numRuns: 1000,
  });
});

test("any sweep is accepted or rejected with one line, and promptly (a sweep is a run per point)", () => {
  const size = fc.oneof(fc.nat(), fc.integer({ min: 0, max: 2 ** 41 }), edgeValue);
  const factor = fc.oneof(fc.double({ min: 0.5, max: 8, noNaN: true }), fc.constantFrom(1, 1 + 1e-9, 1.0001, 1.5, 2));
  const range = fc.record({ from: size, to: size, factor }, { requiredKeys: [] });
  const sweep = fc.oneof(range, fc.array(size, { maxLength: 20 }), anyValue);
  fc.assert(
    fc.property(sweep, (count) => {
      const started = Date.now();
      load(JSON.stringify({ ...VALID[0], sweep: { count } }), 4);
      assert.ok(Date.now() - started < 2000, `took ${Date.now() - started} ms`);
    }),
    RUNS,
  );
});

test("random bytes and text, and deep nesting, are rejected with one line", () => {
  const bytes = fc.uint8Array({ maxLength: 512 }).map((b) => Buffer.from(b).toString("utf8"));
  const jsonish = fc.array(fc.constantFrom("{", "}", "[", "]", '"', ":", ",", "1", "-", "e", "\\", "\uFEFF", " ", "\n", "null", "tru"), { maxLength: 60 }).map((a) => a.join(""));
  const deep = fc.tuple(fc.integer({ min: 1_000, max: 200_000 }), fc.constantFrom("[", '{"a":', '{"stages":['), fc.boolean()).map(
    ([n, open, closed]) => open.repeat(n) + (closed ? "1" + (open === "[" ? "]" : "}").repeat(n) : ""),
  );
  fc.assert(fc.property(fc.oneof(bytes, jsonish, fc.string({ unit: "binary", maxLength: 200 }), deep), (text) => void load(text, 4)), RUNS);
});

test("run configurations: random values are accepted or rejected with one line", () => {
  fc.assert(
    fc.property(fc.oneof(fc.jsonValue({ maxDepth: 4 }), fc.dictionary(anyKey, anyValue)), (v) => {
      try {
        parseRunConfig(JSON.stringify(v) ?? "null", "run.json");
      } catch (err) {
        assert.ok(err instanceof ConfigError && !err.message.includes("\n"), String(err));
      }
    }),
    RUNS,
  );
});

test("runner validate on hostile files: exit 0, or exit 2 with one line and no stack trace", { timeout: 120_000 }, async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-fuzz-"));
  try {
    const samples = fc.sample(fc.oneof(fc.uint8Array({ maxLength: 256 }).map((b) => Buffer.from(b)), fc.array(mutation, { minLength: 1, maxLength: 3 }).map((ms) => mutate(VALID[0], ms))), { numRuns: 12, seed: 10 });
    samples.push("[".repeat(100_000), '{"stages":'.repeat(50_000));
    for (const [i, content] of samples.entries()) {
      const file = path.join(dir, `job${i}.json`);
      writeFileSync(file, content);
      const p = await runNode([RUNNER, "validate", file]);
      assert.ok(p.code === 0 || p.code === 2, `exit ${p.code}: ${p.stderr}`);
      if (p.code === 2) {
        assert.equal(p.stderr.trimEnd().split("\n").length, 1, p.stderr);
        assert.match(p.stderr, new RegExp(`^runner: ${file.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}: `));
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
