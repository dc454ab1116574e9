import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, formatJsonPath } from "../dist/config/errors.js";
import { formatSize, parseSize } from "../dist/config/size.js";
import { stageHasReduce, stageInputs } from "../dist/config/job.js";
import { loadJob, loadRunConfig, parseJob, parseRunConfig } from "../dist/config/load.js";
import { validateGraph } from "../dist/graph/validate.js";

const tensors = { g: { dtype: "float32", count: "4Ki" }, h: { dtype: "float32", count: 100 }, n: { dtype: "int32", count: 8 } };
const stages = [{ id: "ar", op: "allreduce", input: "g" }];

/** A job file's text with some top-level fields replaced. */
function jobText(overrides = {}) {
  return JSON.stringify({ name: "t", tensors, stages, ...overrides });
}

/** What `runner validate` does: schema, then graph. Returns the error message or "ok". */
function check(text, worldSize) {
  try {
    validateGraph(parseJob(text, "job.json"), "job.json", worldSize);
    return "ok";
  } catch (error) {
    assert.ok(error instanceof ConfigError, `not a ConfigError: ${error}`);
    assert.equal(error.exitCode, 2);
    assert.ok(!error.message.includes("\n"), "message must be one line");
    return error.message;
  }
}

test("parseSize reads plain, decimal and binary sizes", () => {
  const cases = [
    [0, 0], [4096, 4096], ["4096", 4096], ["4Ki", 4096], ["16Mi", 16 * 2 ** 20], ["1Gi", 2 ** 30], ["1Ti", 2 ** 40],
    ["2Ti", null], ["1k", 1000], ["1K", 1000], ["1M", 1e6], ["1G", 1e9], ["1T", 1e12], ["1.5Mi", 1572864],
    ["0.5Ki", 512], ["1.005k", 1005], [2 ** 40, 2 ** 40],
  ];
  for (const [input, expected] of cases) {
    if (expected === null) assert.throws(() => parseSize(input), RangeError);
    else assert.equal(parseSize(input), expected, String(input));
  }
});

test("parseSize rejects what is not a whole, non-negative size", () => {
  const expected = (got) => ({ name: "RangeError", message: `expected a size like 4096, "4Ki", "16Mi" or "1Gi", got ${got}` });
  assert.throws(() => parseSize("4Xi"), expected('"4Xi"'));
  assert.throws(() => parseSize("4ki"), expected('"4ki"'));
  assert.throws(() => parseSize("-4"), expected('"-4"'));
  assert.throws(() => parseSize(" 4"), expected('" 4"'));
  assert.throws(() => parseSize(""), expected('""'));
  assert.throws(() => parseSize(-1), expected("-1"));
  assert.throws(() => parseSize(1.5), expected("1.5"));
  assert.throws(() => parseSize("1.1Mi"), { message: 'expected a whole number, "1.1Mi" is not' });
  assert.throws(() => parseSize(2 ** 40 + 1), { message: "expected a size of at most 1Ti, got 1099511627777" });
  assert.throws(() => parseSize("1025Gi"), { message: 'expected a size of at most 1Ti, got "1025Gi"' });
});

test("formatSize uses binary units", () => {
  assert.equal(formatSize(24), "24 B");
  assert.equal(formatSize(4096), "4 KiB");
  assert.equal(formatSize(16 * 2 ** 20), "16 MiB");
  assert.equal(formatSize(2 ** 30), "1 GiB");
  assert.equal(formatSize(1536), "1.5 KiB");
  assert.equal(formatSize(1000), "1000 B");
});

test("formatJsonPath writes JavaScript-style paths", () => {
  assert.equal(formatJsonPath([]), "");
  assert.equal(formatJsonPath(["stages", 2, "root"]), "stages[2].root");
  assert.equal(formatJsonPath(["tensors", "grad", "count"]), "tensors.grad.count");
  assert.equal(formatJsonPath(["tensors", "my grad"]), 'tensors["my grad"]');
  assert.equal(formatJsonPath(["tensors", "w.1"]), 'tensors["w.1"]');
});

test("ConfigError formats file, path and message", () => {
  const error = new ConfigError("a.json", "stages[0].op", "bad");
  assert.equal(error.message, "a.json: stages[0].op: bad");
  assert.equal(error.exitCode, 2);
  assert.equal(error.file, "a.json");
  assert.equal(error.jsonPath, "stages[0].op");
  assert.equal(new ConfigError("a.json", "", "bad").message, "a.json: bad");
});

const OPS =
  '"allreduce", "reduce_scatter", "all_gather", "gather", "igather", "broadcast", "reduce", "scatter", "all_to_all", "all_to_allv", "send_recv", "barrier", "compute", "compressed_allreduce", "quantized_allreduce"';

const badJobs = [
  ["JSON syntax error", '{\n  "name": "t",\n  "stages": [ { "id": "a" "op": "barrier" } ]\n}', undefined,
    'job.json: line 3 column 27: invalid JSON: expected "," or "}" after a property value, got "\\""'],
  ["trailing comma", '{ "name": "t", }', undefined, 'job.json: line 1 column 14: invalid JSON: trailing comma before "}"'],
  ["truncated file", '{ "name": "t",\n', undefined,
    'job.json: line 2 column 1: invalid JSON: expected a double-quoted property name, got end of file'],
  ["bad literal", '{ "check": tru }', undefined, 'job.json: line 1 column 12: invalid JSON: unexpected "tru", expected a value'],
  ["unknown top-level key", jobText({ iteratons: 10 }), undefined, 'job.json: unknown key "iteratons" (did you mean "iterations"?)'],
  ["misspelt required key", JSON.stringify({ name: "t", stagse: stages }), undefined, 'job.json: unknown key "stagse" (did you mean "stages"?)'],
  ["unknown key in a stage", jobText({ stages: [{ id: "a", op: "allreduce", inptu: "g" }] }), undefined,
    'job.json: stages[0]: unknown key "inptu" (did you mean "input"?)'],
  ["unknown op", jobText({ stages: [{ id: "a", op: "allreduc", input: "g" }] }), undefined,
    `job.json: stages[0].op: unknown op "allreduc", expected one of ${OPS}`],
  ["missing op", jobText({ stages: [{ id: "a", input: "g" }] }), undefined, `job.json: stages[0].op: missing, expected one of ${OPS}`],
  ["missing input", jobText({ stages: [{ id: "a", op: "broadcast" }] }), undefined, "job.json: stages[0].input: missing, expected a string"],
  ["input on a barrier", jobText({ stages: [{ id: "a", op: "barrier", input: "g" }] }), undefined, 'job.json: stages[0]: unknown key "input"'],
  ["bad size string", jobText({ tensors: { g: { dtype: "float32", count: "4Xi" } } }), undefined,
    'job.json: tensors.g.count: expected a size like 4096, "4Ki", "16Mi" or "1Gi", got "4Xi"'],
  ["negative count", jobText({ tensors: { g: { dtype: "float32", count: -8 } } }), undefined,
    'job.json: tensors.g.count: expected a size like 4096, "4Ki", "16Mi" or "1Gi", got -8'],
  ["fractional size", jobText({ tensors: { g: { dtype: "float32", count: "1.1Mi" } } }), undefined,
    'job.json: tensors.g.count: expected a whole number, "1.1Mi" is not'],
  ["count too large", jobText({ tensors: { g: { dtype: "float32", count: "2Ti" } } }), undefined,
    'job.json: tensors.g.count: expected a size of at most 1Ti, got "2Ti"'],
  ["iterations 0", jobText({ iterations: 0 }), undefined, "job.json: iterations: expected at least 1, got 0"],
  ["fractional iterations", jobText({ iterations: 2.5 }), undefined, "job.json: iterations: expected an integer, got 2.5"],
  ["zero timeout", jobText({ timeoutSec: 0 }), undefined, "job.json: timeoutSec: expected more than 0, got 0"],
  ["bad dtype", jobText({ tensors: { g: { dtype: "float8", count: 4 } } }), undefined,
    'job.json: tensors.g.dtype: expected one of "float32", "float64", "int32", "int64", "float16", "bfloat16", got "float8"'],
  ["bad fill kind", jobText({ tensors: { g: { dtype: "float32", count: 4, fill: { kind: "gauss" } } } }), undefined,
    'job.json: tensors.g.fill.kind: unknown kind "gauss", expected one of "normal", "uniform", "integers", "constant", "rank"'],
  ["uniform low >= high", jobText({ tensors: { g: { dtype: "float32", count: 4, fill: { kind: "uniform", low: 1, high: 1 } } } }), undefined,
    "job.json: tensors.g.fill: expected low < high, got low 1 and high 1"],
  ["integers low > high", jobText({ tensors: { g: { dtype: "int32", count: 4, fill: { kind: "integers", low: 3, high: 2 } } } }), undefined,
    "job.json: tensors.g.fill: expected low <= high, got low 3 and high 2"],
  ["bad tensor name", jobText({ tensors: { "my grad": { dtype: "float32", count: 4 } } }), undefined,
    'job.json: tensors["my grad"]: expected a tensor name (a letter or "_", then letters, digits, "_", "." or "-"), got "my grad"'],
  ["bad job name", jobText({ name: "my job" }), undefined, 'job.json: name: expected 1 to 128 letters, digits, "_", "." or "-", got "my job"'],
  ["bad reduce op", jobText({ stages: [{ id: "a", op: "allreduce", input: "g", reduce: "avg" }] }), undefined,
    'job.json: stages[0].reduce: expected one of "sum", "mean", "max", "min", got "avg"'],
  ["algorithm not available for the op", jobText({ stages: [{ id: "a", op: "gather", input: "g", algorithm: "ring" }] }), undefined,
    'job.json: stages[0].algorithm: expected one of "auto", "direct", "tree", "shared", got "ring"'],
  ["empty stages", jobText({ stages: [] }), undefined, "job.json: stages: expected at least 1 item, got 0"],
  ["stages not a list", jobText({ stages: {} }), undefined, "job.json: stages: expected an array, got an object"],
  ["unknown device", jobText({ device: "gpu" }), undefined, 'job.json: device: expected one of "cpu", "cuda", "npu", got "gpu"'],
  ["sweep from > to", jobText({ sweep: { count: { from: "1Mi", to: "1Ki" } } }), undefined,
    "job.json: sweep.count.from: expected from <= to, got from 1048576 and to 1024"],
  ["sweep missing to", jobText({ sweep: { count: { from: "1Ki" } } }), undefined,
    'job.json: sweep.count.to: missing, expected a size like 4096, "4Ki", "16Mi" or "1Gi"'],
  ["sweep factor 1", jobText({ sweep: { count: { from: 1, to: 8, factor: 1 } } }), undefined,
    "job.json: sweep.count.factor: expected more than 1, got 1"],
  ["sweep list with a bad size", jobText({ sweep: { count: [1, "x"] } }), undefined,
    'job.json: sweep.count[1]: expected a size like 4096, "4Ki", "16Mi" or "1Gi", got "x"'],
  ["sweep count of the wrong type", jobText({ sweep: { count: "1Ki" } }), undefined,
    'job.json: sweep.count: expected {"from": size, "to": size, "factor": n} or [size, ...], got "1Ki"'],
  // Every union of the job explained in the job's terms, where zod said "an object or an object or ...".
  ["a group written as a rank list", jobText({ groups: { half: [[0, 1], [2, 3]] } }), undefined,
    'job.json: groups.half: expected {"split": "host"|"across"}, {"block": n}, {"stride": n} or {"ranks": [[n, ...], ...]}, got an array'],
  ["a group of none of the forms", jobText({ groups: { half: { size: 2 } } }), undefined,
    'job.json: groups.half: expected {"split": "host"|"across"}, {"block": n}, {"stride": n} or {"ranks": [[n, ...], ...]}, got an object'],
  ["a group's split mistyped", jobText({ groups: { half: { split: "hosts" } } }), undefined,
    'job.json: groups.half.split: expected one of "host", "across", got "hosts"'],
  ["all_to_allv counts not a matrix", jobText({ stages: [{ id: "a", op: "all_to_allv", input: "g", counts: 3 }] }), undefined,
    "job.json: stages[0].counts: expected [[size, ...], ...] or [[[size, ...], ...], ...], got 3"],
  ["qgZ bits not 4 or 8", jobText({ stages: [{ id: "a", op: "quantized_allreduce", input: "g", bits: "x" }] }), undefined,
    'job.json: stages[0].bits: expected 4 or 8, got "x"'],
  ["a swept value of no plain type", jobText({ sweep: { params: { algorithm: [{}] } } }), undefined,
    "job.json: sweep.params.algorithm[0]: expected a string or a number or true or false, got an object"],
  ["empty sweep list", jobText({ sweep: { count: [] } }), undefined, "job.json: sweep.count: expected at least 1 item, got 0"],
  ["coalesced without inputs", jobText({ stages: [{ id: "rs", op: "reduce_scatter", input: "g", coalesced: true }] }), undefined,
    'job.json: stages[0].coalesced: "coalesced": true needs "inputs" (a list of tensors)'],
  ["several inputs without coalesced", jobText({ stages: [{ id: "rs", op: "reduce_scatter", inputs: ["g", "h"] }] }), undefined,
    'job.json: stages[0].inputs: more than one tensor needs "coalesced": true'],
  ["both input and inputs", jobText({ stages: [{ id: "rs", op: "reduce_scatter", input: "g", inputs: ["g"] }] }), undefined,
    'job.json: stages[0].inputs: give either "input" or "inputs", not both'],
  ["neither input nor inputs", jobText({ stages: [{ id: "rs", op: "reduce_scatter" }] }), undefined,
    'job.json: stages[0]: expected "input" (one tensor) or "inputs" (a list of tensors)'],
  ["empty inputs", jobText({ stages: [{ id: "rs", op: "reduce_scatter", inputs: [] }] }), undefined,
    "job.json: stages[0].inputs: expected at least 1 item, got 0"],
  ["unknown tensor", jobText({ stages: [{ id: "a", op: "allreduce", input: "gard" }] }), undefined,
    'job.json: stages[0].input: unknown tensor "gard" (tensors: "g", "h", "n")'],
  ["unknown tensor in inputs", jobText({ stages: [{ id: "a", op: "reduce_scatter", inputs: ["g", "x"], coalesced: true }] }), undefined,
    'job.json: stages[0].inputs[1]: unknown tensor "x" (tensors: "g", "h", "n")'],
  ["no tensors at all", jobText({ tensors: {}, stages: [{ id: "a", op: "allreduce", input: "g" }] }), undefined,
    'job.json: stages[0].input: unknown tensor "g" (the job declares no tensors)'],
  ["unknown after id", jobText({ stages: [{ id: "a", op: "barrier" }, { id: "b", op: "barrier", after: ["c"] }] }), undefined,
    'job.json: stages[1].after[0]: unknown stage "c" (stages: "a", "b")'],
  ["after itself", jobText({ stages: [{ id: "a", op: "barrier", after: ["a"] }] }), undefined,
    'job.json: stages[0].after[0]: stage "a" cannot run after itself'],
  ["cycle", jobText({ stages: [{ id: "x", op: "barrier" }, { id: "a", op: "barrier", after: ["b"] }, { id: "b", op: "barrier", after: ["a"] }] }),
    undefined, "job.json: stages[1].after: cycle a -> b -> a"],
  ["duplicate ids", jobText({ stages: [{ id: "a", op: "barrier" }, { id: "a", op: "compute", us: 5 }] }), undefined,
    'job.json: stages[1].id: duplicate stage id "a" (also stages[0])'],
  ["coalesced dtype mismatch", jobText({ stages: [{ id: "rs", op: "reduce_scatter", inputs: ["g", "n"], coalesced: true }] }), undefined,
    'job.json: stages[0].inputs[1]: coalesced tensors must share a dtype: "g" is float32 but "n" is int32'],
  ["mean on int32", jobText({ stages: [{ id: "a", op: "allreduce", input: "n", reduce: "mean" }] }), undefined,
    'job.json: stages[0].reduce: "mean" needs a floating-point dtype but tensor "n" is int32'],
  ["root out of range", jobText({ stages: [{ id: "bc", op: "broadcast", input: "g", root: 4 }] }), 4,
    "job.json: stages[0].root: root 4 is out of range for 4 ranks (expected 0..3)"],
  ["sweep without tensors", jobText({ tensors: {}, stages: [{ id: "b", op: "barrier" }], sweep: { count: [1, 2] } }), undefined,
    "job.json: sweep: nothing to sweep: the job declares no tensors"],
];

// Schema errors also say where the value is (tested below); these one-line documents compare without it.
const SCHEMA_POSITION = /^(job\.json): line 1 column \d+(?=: (?!invalid JSON))/;

for (const [name, text, worldSize, expected] of badJobs) {
  test(`bad job: ${name}`, () => assert.equal(check(text, worldSize).replace(SCHEMA_POSITION, "$1"), expected));
}

test("schema errors say the line and column of the value, the unknown key, or the object missing a key", () => {
  const text = [
    "{",
    '  "name": "t",',
    '  "tensors": { "g": { "dtype": "float32", "count": 8 } },',
    '  "stages": [',
    '    { "id": "a", "op": "allreduce", "input": "g" },',
    '    { "id": "b", "op": "broadcast", "input": "g", "root": -1 }',
    "  ]",
    "}",
  ];
  const error = (edit) => check(edit([...text]).join("\n"));
  assert.equal(error((t) => t), "job.json: line 6 column 59: stages[1].root: expected at least 0, got -1");
  assert.equal(error((t) => ((t[5] = t[5].replace('"root": -1', '"rot": 1')), t)),
    'job.json: line 6 column 51: stages[1]: unknown key "rot" (did you mean "root"?)');
  assert.equal(error((t) => ((t[4] = '    { "id": "a", "input": "g" },'), t)),
    `job.json: line 5 column 5: stages[0].op: missing, expected one of ${OPS}`);
  assert.equal(error((t) => ((t[2] = t[2].replace('"float32"', '"float8"')), t)),
    'job.json: line 3 column 32: tensors.g.dtype: expected one of "float32", "float64", "int32", "int64", "float16", "bfloat16", got "float8"');
  // A byte-order mark is no column.
  assert.equal(check("\uFEFF" + JSON.stringify({ name: "t", stages: [], tensors: {} })), "job.json: line 1 column 22: stages: expected at least 1 item, got 0");
});

test("root in range passes when the world is large enough", () => {
  assert.equal(check(jobText({ stages: [{ id: "bc", op: "broadcast", input: "g", root: 4 }] }), 5), "ok");
  assert.equal(check(jobText({ stages: [{ id: "bc", op: "broadcast", input: "g", root: 4 }] })), "ok");
});

test("a minimal job parses with every default filled in", () => {
  const job = parseJob(jobText(), "job.json");
  assert.deepEqual(job, {
    name: "t",
    device: "cpu",
    iterations: 20,
    warmup: 5,
    check: false,
    timeoutSec: 300,
    tensors: {
      g: { dtype: "float32", count: 4096, fill: { kind: "integers", seed: 1, low: -4, high: 4 } },
      h: { dtype: "float32", count: 100, fill: { kind: "integers", seed: 1, low: -4, high: 4 } },
      n: { dtype: "int32", count: 8, fill: { kind: "integers", seed: 1, low: -4, high: 4 } },
    },
    stages: [{ id: "ar", op: "allreduce", input: "g", reduce: "sum", algorithm: "auto" }],
  });
  assert.deepEqual(parseJob(JSON.stringify({ name: "b", stages: [{ id: "b", op: "barrier" }] }), "j").tensors, {});
});

test("a full job parses: every op, fills, sweep and $schema", () => {
  const text = JSON.stringify({
    $schema: "../schema/job.schema.json",
    name: "full-1.0",
    iterations: 3,
    warmup: 0,
    check: true,
    tensors: {
      grad: { dtype: "float32", count: "16Mi", fill: { kind: "normal", seed: 7 } },
      w: { dtype: "float32", count: "1.5Ki", fill: { kind: "uniform" } },
      c: { dtype: "float64", count: 10, fill: { kind: "constant", value: 2.5 } },
      r: { dtype: "int64", count: 10, fill: { kind: "rank" } },
      i: { dtype: "int32", count: 10, fill: { kind: "integers" } },
    },
    stages: [
      { id: "exact", op: "allreduce", input: "grad", reduce: "mean", algorithm: "ring" },
      { id: "shards", op: "reduce_scatter", inputs: ["grad", "w"], coalesced: true },
      { id: "one", op: "reduce_scatter", input: "c", reduce: "max" },
      { id: "ag", op: "all_gather", input: "w" },
      { id: "collect", op: "igather", input: "grad", root: 1, after: ["exact"], timeoutSec: 10 },
      { id: "g", op: "gather", input: "w", algorithm: "tree" },
      { id: "bc", op: "broadcast", input: "c" },
      { id: "red", op: "reduce", input: "i", reduce: "min" },
      { id: "sc", op: "scatter", input: "r" },
      { id: "a2a", op: "all_to_all", input: "w" },
      { id: "shift", op: "send_recv", input: "w", shift: -1 },
      { id: "sync", op: "barrier", algorithm: "dissemination" },
      { id: "busy", op: "compute", us: 250 },
    ],
    sweep: { count: { from: "1Ki", to: "64Mi" } },
  });
  const job = parseJob(text, "full.json");
  validateGraph(job, "full.json", 2);
  assert.deepEqual(job.tensors.grad.fill, { kind: "normal", seed: 7, mean: 0, std: 1 });
  assert.deepEqual(job.tensors.w.fill, { kind: "uniform", seed: 0, low: -1, high: 1 });
  assert.deepEqual(job.tensors.i.fill, { kind: "integers", seed: 0, low: -4, high: 4 });
  assert.equal(job.tensors.w.count, 1536);
  assert.deepEqual(job.sweep, { count: { from: 1024, to: 64 * 2 ** 20, factor: 2 } });
  const byId = Object.fromEntries(job.stages.map((s) => [s.id, s]));
  assert.deepEqual(byId.shards, { id: "shards", op: "reduce_scatter", inputs: ["grad", "w"], coalesced: true, reduce: "sum", algorithm: "auto" });
  assert.equal(byId.collect.root, 1);
  assert.equal(byId.g.root, 0);
  assert.equal(byId.shift.shift, -1);
  assert.equal(byId.busy.algorithm, "auto");
  assert.deepEqual(stageInputs(byId.shards), ["grad", "w"]);
  assert.deepEqual(stageInputs(byId.one), ["c"]);
  assert.deepEqual(stageInputs(byId.exact), ["grad"]);
  assert.deepEqual(stageInputs(byId.sync), []);
  assert.deepEqual(stageInputs(byId.busy), []);
  assert.deepEqual(job.stages.filter(stageHasReduce).map((s) => s.id), ["exact", "shards", "one", "red"]);
});

test("a byte-order mark is accepted", () => {
  assert.equal(parseJob(`\uFEFF${jobText()}`, "j").name, "t");
});

test("loadJob reads files and reports unreadable ones", () => {
  const dir = mkdtempSync(join(tmpdir(), "spmd-config-"));
  const file = join(dir, "job.json");
  writeFileSync(file, jobText());
  assert.equal(loadJob(file).name, "t");
  const missing = join(dir, "nope.json");
  assert.throws(() => loadJob(missing), { message: `${missing}: cannot read file: ENOENT: no such file or directory` });
  assert.throws(() => loadJob(dir), { message: `${dir}: not a regular file (a folder): only regular files are read` });
});

test("run configuration: defaults, overrides and errors", () => {
  const defaults = {
    backend: "auto",
    connectTimeoutSec: 60,
    log: { level: "info", allRanks: false, files: false },
    output: { dir: "results" },
    rendezvous: {},
    tcp: {},
  };
  assert.deepEqual(loadRunConfig(), defaults);
  assert.deepEqual(parseRunConfig("{}", "run.json"), defaults);
  const custom = parseRunConfig(JSON.stringify({ backend: "tcp", log: { level: "debug" }, rendezvous: { port: 29500 } }), "run.json");
  assert.equal(custom.backend, "tcp");
  assert.deepEqual(custom.log, { level: "debug", allRanks: false, files: false });
  assert.deepEqual(custom.rendezvous, { port: 29500 });
  assert.deepEqual(parseRunConfig('{"tcp": {"iface": "eth,ib"}}', "run.json").tcp, { iface: "eth,ib" });
  assert.throws(() => parseRunConfig('{"tcp": {"ifname": "eth0"}}', "run.json"), { message: /run.json: line 1 column 10: tcp: unknown key "ifname"/ });
  assert.equal(parseRunConfig('{"timeoutSec": 2.5}', "run.json").timeoutSec, 2.5);
  assert.throws(() => parseRunConfig('{"backend": "gloo"}', "run.json"), {
    message: 'run.json: line 1 column 13: backend: expected one of "auto", "shm", "tcp", "shm+tcp", "mpi", "nccl", "hccl", got "gloo"',
  });
  assert.throws(() => parseRunConfig('{"rendezvous": {"port": 70000}}', "run.json"), {
    message: "run.json: line 1 column 25: rendezvous.port: expected at most 65535, got 70000",
  });
  assert.throws(() => parseRunConfig('{"log": {"levle": "warn"}}', "run.json"), {
    message: 'run.json: line 1 column 10: log: unknown key "levle" (did you mean "level"?)',
  });
  const dir = mkdtempSync(join(tmpdir(), "spmd-config-"));
  const file = join(dir, "run.json");
  writeFileSync(file, '{ "output": { "dir": "out", "json": "r.json" } }');
  assert.deepEqual(loadRunConfig(file).output, { dir: "out", json: "r.json" });
});

test("the generated JSON Schemas exist and describe the ops", () => {
  const schemaDir = new URL("../schema/", import.meta.url);
  const job = JSON.parse(readFileSync(new URL("job.schema.json", schemaDir), "utf8"));
  const text = JSON.stringify(job);
  for (const op of JSON.parse(`[${OPS}]`)) assert.ok(text.includes(`"const":"${op}"`), op);
  assert.deepEqual(job.required, ["name", "stages"]);
  assert.ok(job.properties.$schema);
  const run = JSON.parse(readFileSync(new URL("run-config.schema.json", schemaDir), "utf8"));
  assert.ok(run.properties.backend.enum.includes("nccl"));
  assert.equal(run.required, undefined);
});
