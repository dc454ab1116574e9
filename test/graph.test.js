import { test } from "node:test";
import assert from "node:assert/strict";
import { parseJob } from "../dist/config/load.js";
import { schedule } from "../dist/graph/schedule.js";
import { validateGraph } from "../dist/graph/validate.js";

const tensors = {
  f: { dtype: "float32", count: 16 },
  d: { dtype: "float64", count: 16 },
  i: { dtype: "int32", count: 16 },
  l: { dtype: "int64", count: 16 },
};

function job(stages, extra = {}) {
  return parseJob(JSON.stringify({ name: "g", tensors, stages, ...extra }), "g.json");
}

const barrier = (id, after) => ({ id, op: "barrier", ...(after && { after }) });
const ids = (stages) => stages.map((s) => s.id);

test("schedule keeps declaration order when nothing constrains it", () => {
  assert.deepEqual(ids(schedule(job([barrier("c"), barrier("a"), barrier("b")]))), ["c", "a", "b"]);
});

test("schedule moves a stage after what it waits for, ties by declaration order", () => {
  const j = job([barrier("a", ["d"]), barrier("b"), barrier("c", ["a"]), barrier("d"), barrier("e", ["b"])]);
  // b and d are ready first; once d is done, a is declared before e and c before e.
  assert.deepEqual(ids(schedule(j)), ["b", "d", "a", "c", "e"]);
});

test("schedule with a diamond and repeated after entries", () => {
  const j = job([barrier("join", ["left", "right", "left"]), barrier("right", ["top"]), barrier("left", ["top"]), barrier("top")]);
  assert.deepEqual(ids(schedule(j)), ["top", "right", "left", "join"]);
});

test("schedule is the same for every call (every rank)", () => {
  const stages = Array.from({ length: 30 }, (_, k) => barrier(`s${k}`, k % 3 === 0 && k > 0 ? [`s${k - 2}`] : undefined));
  const first = ids(schedule(job(stages)));
  for (let k = 0; k < 5; k++) assert.deepEqual(ids(schedule(job(stages))), first);
});

test("schedule refuses a cyclic job", () => {
  assert.throws(() => schedule(job([barrier("a", ["b"]), barrier("b", ["a"])])), /cycle/);
});

test("a valid graph passes", () => {
  const j = job([
    { id: "ar", op: "allreduce", input: "f", reduce: "mean" },
    { id: "sum", op: "allreduce", input: "i", reduce: "sum", after: ["ar"] },
    { id: "rs", op: "reduce_scatter", inputs: ["f", "f"], coalesced: true, reduce: "mean" },
    { id: "bc", op: "broadcast", input: "l", root: 3 },
  ]);
  assert.doesNotThrow(() => validateGraph(j, "g.json", 4));
});

function failure(j, worldSize) {
  try {
    validateGraph(j, "g.json", worldSize);
  } catch (error) {
    assert.equal(error.name, "ConfigError");
    assert.equal(error.exitCode, 2);
    return error.message;
  }
  assert.fail("expected a ConfigError");
}

const invalid = [
  ["duplicate ids", job([barrier("a"), barrier("b"), barrier("a")]), 'g.json: stages[2].id: duplicate stage id "a" (also stages[0])'],
  ["unknown input", job([{ id: "a", op: "all_gather", input: "x" }]), 'g.json: stages[0].input: unknown tensor "x" (tensors: "f", "d", "i", "l")'],
  ["unknown tensor among inputs", job([{ id: "a", op: "reduce_scatter", inputs: ["f", "zz"], coalesced: true }]),
    'g.json: stages[0].inputs[1]: unknown tensor "zz" (tensors: "f", "d", "i", "l")'],
  ["unknown after", job([barrier("a", ["nope"])]), 'g.json: stages[0].after[0]: unknown stage "nope" (stages: "a")'],
  ["after itself", job([barrier("a"), barrier("b", ["a", "b"])]), 'g.json: stages[1].after[1]: stage "b" cannot run after itself'],
  ["two-stage cycle", job([barrier("a", ["b"]), barrier("b", ["a"])]), "g.json: stages[0].after: cycle a -> b -> a"],
  ["cycle reported from its first stage, not from a stage behind it",
    job([barrier("tail", ["q"]), barrier("p", ["r"]), barrier("q", ["p"]), barrier("r", ["q"])]),
    "g.json: stages[1].after: cycle p -> r -> q -> p"],
  ["coalesced dtype mismatch", job([{ id: "rs", op: "reduce_scatter", inputs: ["f", "f", "d"], coalesced: true }]),
    'g.json: stages[0].inputs[2]: coalesced tensors must share a dtype: "f" is float32 but "d" is float64'],
  ["mean on int32", job([{ id: "ar", op: "allreduce", input: "i", reduce: "mean" }]),
    'g.json: stages[0].reduce: "mean" needs a floating-point dtype but tensor "i" is int32'],
  ["mean on int64 in a reduce", job([{ id: "r", op: "reduce", input: "l", reduce: "mean" }]),
    'g.json: stages[0].reduce: "mean" needs a floating-point dtype but tensor "l" is int64'],
  ["mean on an integer reduce_scatter", job([{ id: "rs", op: "reduce_scatter", input: "i", reduce: "mean" }]),
    'g.json: stages[0].reduce: "mean" needs a floating-point dtype but tensor "i" is int32'],
  ["root out of range", job([{ id: "g", op: "gather", input: "f", root: 2 }]), "g.json: stages[0].root: root 2 is out of range for 2 ranks (expected 0..1)", 2],
  ["root out of range for one rank", job([{ id: "g", op: "gather", input: "f", root: 1 }]), "g.json: stages[0].root: root 1 is out of range for 1 rank (expected 0)", 1],
  ["igather root out of range", job([barrier("x"), { id: "ig", op: "igather", input: "f", root: 7 }]),
    "g.json: stages[1].root: root 7 is out of range for 4 ranks (expected 0..3)", 4],
  ["sweep with no tensors", parseJob(JSON.stringify({ name: "s", stages: [barrier("b")], sweep: { count: [8] } }), "g.json"),
    "g.json: sweep: nothing to sweep: the job declares no tensors"],
  ["unsafe shift in a job built by code", { ...job([barrier("a")]), stages: [{ id: "s", op: "send_recv", input: "f", shift: 2 ** 60, algorithm: "auto" }] },
    "g.json: stages[0].shift: expected a safe integer, got 1152921504606847000"],
];

for (const [name, j, expected, worldSize] of invalid) {
  test(`invalid graph: ${name}`, () => assert.equal(failure(j, worldSize), expected));
}

// Streams, groups and inPlace (DESIGN.md, "Graphs, streams and groups").
const groups = {
  pair: { block: 2 }, parity: { stride: 2 }, host: { split: "host" }, across: { split: "across" },
  custom: { ranks: [[0, 3], [1, 2]] }, triple: { block: 3 },
};
const ag = (id, extra) => ({ id, op: "all_gather", input: "f", ...extra });
const graphInvalid = [
  ["unknown group", job([ag("a", { group: "nope" })], { groups }),
    'g.json: stages[0].group: unknown group "nope" (groups: "pair", "parity", "host", "across", "custom", "triple")'],
  ["unknown group with none declared", job([ag("a", { group: "tp" })]), 'g.json: stages[0].group: unknown group "tp" (the job declares no groups)'],
  ["unknown stream among the declared ones", job([ag("a", { stream: "grds" })], { streams: ["grads", "prefetch"] }),
    'g.json: stages[0].stream: unknown stream "grds" (streams: "main", "grads", "prefetch")'],
  ["explicit partition missing a rank", job([ag("a", { group: "g" })], { groups: { g: { ranks: [[0, 1], [2]] } } }),
    "g.json: groups.g: not a partition of the ranks: rank 3 of 4 in no group", 4],
  ["explicit partition with a rank twice", job([ag("a")], { groups: { g: { ranks: [[0, 1], [1, 2, 3]] } } }),
    "g.json: groups.g: not a partition of the ranks: rank 1 is in group 0 and again in group 1", 4],
  ["explicit partition past the world", job([ag("a")], { groups: { g: { ranks: [[0, 1], [2, 3, 4]] } } }),
    "g.json: groups.g: not a partition of the ranks: rank 4 (group 1) is out of range for 4 ranks", 4],
  ["unequal blocks for a collective", job([ag("a", { group: "triple" })], { groups }),
    'g.json: stages[0].group: group "triple" has groups of 3, 1 ranks: all_gather needs groups of one size (its row reports one group size)', 4],
  ["root outside the group", job([{ id: "b", op: "broadcast", input: "f", root: 2, group: "pair" }], { groups }),
    'g.json: stages[0].root: root 2 is outside the groups of "pair" (2 groups of 2 ranks) (expected 0..1)', 4],
  ["inPlace on gather", job([{ id: "g", op: "gather", input: "f", inPlace: true }]),
    "g.json: stages[0].inPlace: gather has no in-place form (in place: allreduce, reduce_scatter, all_gather, broadcast, all_to_all, reduce)"],
  ["inPlace on a coalesced reduce_scatter", job([{ id: "rs", op: "reduce_scatter", inputs: ["f", "f"], coalesced: true, inPlace: true }]),
    "g.json: stages[0].inPlace: a coalesced reduce_scatter has no in-place form (in place: allreduce, reduce_scatter, all_gather, broadcast, all_to_all, reduce)"],
  ["a group on an estimating stage", job([{ id: "q", op: "compressed_allreduce", input: "f", group: "pair" }], { groups }),
    'g.json: stages[0].group: compressed_allreduce runs over the whole world: "group" is for the exact collectives'],
  ["a cycle through after across streams", job([ag("a", { stream: "s1", after: ["b"] }), ag("b", { stream: "s2", after: ["a"] })]),
    "g.json: stages[0].after: cycle a -> b -> a (across streams s1, s2)"],
  ["more streams than lanes", job(["a", "b", "c", "d", "e"].map((s) => ag(s, { stream: s }))),
    'g.json: stages[3].stream: stream "d" is one too many: a job runs at most 4 streams (main, a, b, c)'],
];
for (const [name, j, expected, worldSize] of graphInvalid) {
  test(`invalid graph: ${name}`, () => assert.equal(failure(j, worldSize), expected));
}

test("split host with unequal hosts fails only where the stage needs equal groups", async () => {
  const j = job([ag("a", { group: "host" })], { groups });
  // Hosts of 3 and 1 ranks, as the ranks found them when they met (each rank's host).
  assert.throws(() => validateGraph(j, "g.json", 4, [0, 0, 0, 1]), {
    message: 'g.json: stages[0].group: group "host" has groups of 3, 1 ranks: all_gather needs groups of one size (its row reports one group size)',
  });
  assert.doesNotThrow(() => validateGraph(job([barrier("b")], { groups }), "g.json", 4, [0, 0, 0, 1]));
  // Before the ranks meet the hosts are unknown: split groups wait for the check after they do.
  assert.doesNotThrow(() => validateGraph(j, "g.json", 4));
});

test("groups resolve to partitions listed by their lowest rank", async () => {
  const { resolveGroups, hostsOf } = await import("../dist/graph/groups.js");
  const hosts = hostsOf([0, 0, 0, 1, 1, 1]);
  assert.deepEqual(hosts, [[0, 1, 2], [3, 4, 5]]);
  // Round-robin placement (mpirun --map-by node): hosts listed by their lowest rank.
  assert.deepEqual(hostsOf([1, 0, 1, 0]), [[0, 2], [1, 3]]);
  assert.deepEqual(resolveGroups({ split: "host" }, 6, hosts), [[0, 1, 2], [3, 4, 5]]);
  assert.deepEqual(resolveGroups({ split: "across" }, 6, hosts), [[0, 3], [1, 4], [2, 5]]);
  assert.deepEqual(resolveGroups({ block: 4 }, 6, hosts), [[0, 1, 2, 3], [4, 5]]);
  assert.deepEqual(resolveGroups({ stride: 3 }, 7, hosts), [[0, 3, 6], [1, 4], [2, 5]]);
  assert.deepEqual(resolveGroups({ ranks: [[5, 1], [4, 0, 2], [3]] }, 6, hosts), [[0, 2, 4], [1, 5], [3]]);
});

// all_to_allv's counts (docs/jobs.md, "all_to_allv"): each mistake one line naming its JSON path, before the ranks meet.
const a2av = (counts, extra = {}) => ({ id: "v", op: "all_to_allv", input: "f", counts, ...extra });
function a2avFailure(stage, worldSize, extra = {}) {
  try {
    return failure(job([stage], { ...(stage.group && { groups }), ...extra }), worldSize);
  } catch (error) {
    if (error.name !== "ConfigError") throw error;
    assert.equal(error.exitCode, 2);
    return error.message.replace(/line \d+ column \d+: /, "");
  }
}
const a2avInvalid = [
  ["a negative count", a2av([[1, -1], [0, 0]]), 2, 'g.json: stages[0].counts[0][1]: expected a size like 4096, "4Ki", "16Mi" or "1Gi", got -1'],
  ["a row of the wrong length", a2av([[1, 1], [0]]), 2, "g.json: stages[0].counts[1]: expected a square matrix: row 1 has 1 entries, the matrix 2 rows"],
  ["a matrix of another world's size", a2av([[1, 1], [0, 0]]), 3, "g.json: stages[0].counts: a 2×2 matrix for the 3 ranks: expected 3×3"],
  ["a matrix of another group's size", a2av([[1, 1, 1], [0, 0, 0], [1, 1, 1]], { group: "pair" }), 4,
    'g.json: stages[0].counts: a 3×3 matrix for the groups of "pair" (2 ranks each): expected 2×2'],
  ["one matrix of a list of the wrong size", a2av([[[1, 1], [0, 0]], [[1]]], { group: "pair" }), 4,
    'g.json: stages[0].counts[1]: a 1×1 matrix for the groups of "pair" (2 ranks each): expected 2×2'],
  ["a list of matrices not one per group", a2av([[[1, 1], [0, 0]]], { group: "pair" }), 4,
    'g.json: stages[0].counts: 1 count matrices for the 2 groups of "pair" (give one per group, or one for all)'],
  ["a row longer than the tensor", a2av([[0, 0], [9, 8]]), 2, 'g.json: stages[0].counts[1]: rank 1 sends 17 elements, more than the 16 of "f"'],
  ["a row longer than the tensor at a sweep count", a2av([[0, 0], [4, 5]]), 2,
    'g.json: stages[0].counts[1]: rank 1 sends 9 elements, more than the 8 of "f" at its smallest sweep count', { sweep: { count: [8, 32] } }],
  ["in place", a2av([[1]], { inPlace: true }), 1,
    "g.json: stages[0].inPlace: all_to_allv has no in-place form (in place: allreduce, reduce_scatter, all_gather, broadcast, all_to_all, reduce)"],
];
for (const [name, stage, worldSize, expected, extra] of a2avInvalid) {
  test(`invalid all_to_allv: ${name}`, () => assert.equal(a2avFailure(stage, worldSize, extra), expected));
}

test("all_to_allv: one matrix for every group, or one per group; zeros and zero rows", () => {
  assert.doesNotThrow(() => validateGraph(job([a2av([[0, 16], [0, 0]], { group: "pair" })], { groups }), "g.json", 4));
  assert.doesNotThrow(() => validateGraph(job([a2av([[[0, 16], [0, 0]], [["8", 8], [0, "1"]]], { group: "pair" })], { groups }), "g.json", 4));
  assert.doesNotThrow(() => validateGraph(job([a2av([[0, 0, 0], [0, 0, 0], [5, 0, 11]])]), "g.json", 3));
});

test("all_to_allv's size is its largest row sum; on mpi a row or column sum past MPI's int counts is refused", async () => {
  const { validateBackend } = await import("../dist/graph/validate.js");
  const { allToAllv } = await import("../dist/stages/all-to-allv.js");
  assert.equal(allToAllv.count(a2av([[0, 3, 5], [2, 2, 2], [7, 0, 1]])), 8);
  assert.equal(allToAllv.busFactor(3), 2 / 3);
  // Equal blocks of n/W are all_to_all of n: the same size and factor, so the same busbw.
  const { stageKind } = await import("../dist/stages/index.js");
  const even = job([a2av([[4, 4, 4, 4], [4, 4, 4, 4], [4, 4, 4, 4], [4, 4, 4, 4]]), { id: "a", op: "all_to_all", input: "f" }]);
  const [v, a] = even.stages.map((s) => stageKind(s));
  assert.equal(v.count(even.stages[0]), a.count(even.stages[1], { job: even }));
  assert.equal(v.busFactor(4), a.busFactor(4));
  const big = parseJob(JSON.stringify({ name: "g", tensors: { f: { dtype: "float32", count: "4Gi" } }, stages: [a2av([["1Gi", "1Gi"], ["1Gi", "1Gi"]])] }), "g.json");
  assert.doesNotThrow(() => validateBackend(big, "g.json", "shm", 2));
  assert.throws(() => validateBackend(big, "g.json", "mpi", 2), { message: /stages\[0\]: stage "v" moves 2147483648 elements in one MPI call, more than MPI's int count allows/ });
});
