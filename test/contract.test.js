// The TS <-> native contract: the names the addon's own tables hold (its exported `enums`) are the names the
// TS side sends and matches on, and the names the job schema accepts map onto them. A dtype, op, algorithm
// or error code added on one side only fails here.
import assert from "node:assert/strict";
import { test } from "node:test";
import { dtypeSchema, stageSchema } from "../dist/config/job.js";
import { runConfigSchema } from "../dist/config/run-config.js";
import { NATIVE_ALGORITHMS, NATIVE_ERROR_CODES, NATIVE_OP_KINDS, native } from "../dist/comm/native.js";

const { enums } = native();
const sorted = (names) => [...names].sort();

test("the addon's dtypes are the job schema's", () => {
  assert.deepEqual(enums.dtypes, dtypeSchema.options);
});

test("the addon's op kinds, algorithms and error codes are the TS side's", () => {
  assert.deepEqual(sorted(enums.ops), sorted(NATIVE_OP_KINDS));
  assert.deepEqual(sorted(enums.algorithms), sorted(NATIVE_ALGORITHMS));
  assert.deepEqual(sorted(enums.errorCodes), sorted(NATIVE_ERROR_CODES));
});

test("every algorithm a stage accepts is native's, and native's others are the library backends' own", () => {
  const accepted = new Set(stageSchema.options.flatMap((s) => s.shape.algorithm?.unwrap().options ?? []));
  assert.ok(accepted.size > 4, [...accepted].join());
  for (const a of accepted) assert.ok(enums.algorithms.includes(a), `stage algorithm "${a}" unknown to native code`);
  const backends = runConfigSchema.shape.backend.unwrap().options;
  for (const a of enums.algorithms.filter((x) => !accepted.has(x))) {
    assert.ok(backends.includes(a), `native algorithm "${a}" is neither a stage's nor a backend's own`);
  }
});

// A one-rank job with a stage of every kind the schema has (the estimating ones both exact and estimating),
// planned as the runner plans it.
const tensors = { x: { dtype: "float32", count: 64, fill: { kind: "integers", seed: 1 } }, y: { dtype: "float32", count: 40 } };
const EVERY_STAGE = [
  { id: "ar", op: "allreduce", input: "x", inPlace: true },
  { id: "rs", op: "reduce_scatter", inputs: ["x", "y"], coalesced: true, reduce: "mean" },
  { id: "ag", op: "all_gather", input: "x" },
  { id: "ga", op: "gather", input: "x" },
  { id: "ig", op: "igather", input: "x" },
  { id: "bc", op: "broadcast", input: "x" },
  { id: "re", op: "reduce", input: "x", reduce: "max" },
  { id: "sc", op: "scatter", input: "x" },
  { id: "aa", op: "all_to_all", input: "x" },
  { id: "av", op: "all_to_allv", input: "x", counts: [[64]] },
  { id: "sr", op: "send_recv", input: "x" },
  { id: "ba", op: "barrier" },
  { id: "co", op: "compute", us: 1 },
  { id: "ob", op: "compressed_allreduce", input: "x", resetEvery: 2 },
  { id: "qh", op: "quantized_allreduce", input: "x", groupSize: 8 },
  { id: "ql", op: "quantized_allreduce", input: "x", bits: 4, output: "full", localSize: 1, errorFeedback: { beta: 0.5 }, groupSize: 8 },
];

async function plannedOps() {
  const { jobSchema } = await import("../dist/config/job.js");
  const { plan } = await import("../dist/graph/plan.js");
  const job = jobSchema.parse({ name: "contract", iterations: 1, warmup: 0, check: true, tensors, stages: EVERY_STAGE });
  return plan(job, { size: 1, hostOf: [0] }).program;
}

/** Runs `program` on a one-rank shm communicator; resolves with the error, or null when it ran. */
async function runAlone(program) {
  const comm = new (native().Communicator)({ backend: "shm", name: `/spmd-contract-${process.pid}`, tag: "00".repeat(32), rank: 0, size: 1, create: true });
  try {
    await comm.run(program);
    return null;
  } catch (e) {
    return e;
  } finally {
    comm.close();
  }
}

test("native reads every op the planner writes, each kind with its own fields (a typed union keyed on kind)", async () => {
  const program = await plannedOps();
  assert.deepEqual(new Set(program.ops.map((o) => o.kind)), new Set(NATIVE_OP_KINDS), "every native kind planned");
  assert.ok(program.ops.some((o) => o.compression?.kind === "onebit") && program.ops.some((o) => o.compression?.layout?.nodeOf));
  assert.equal(await runAlone(program), null);
  // A field of one kind is none of another's: gather has no reduction, barrier no inputs' dtype or root.
  const keys = (kind) => Object.keys(program.ops.find((o) => o.kind === kind)).sort();
  assert.ok(!keys("gather").includes("op") && !keys("barrier").includes("root") && !keys("compute").includes("inPlace"));
});

test("a field the reader does not know, or one it needs and misses, is refused naming it: TS and native cannot drift", async () => {
  const program = await plannedOps();
  for (const [i, op] of program.ops.entries()) {
    const one = (o) => ({ ...program, ops: [...program.ops.slice(0, i), o] });
    // Another kind's field (no kind has both root and coalesced).
    const foreign = "root" in op ? "coalesced" : "root";
    const extra = await runAlone(one({ ...op, [foreign]: 0 }));
    assert.equal(extra?.code, "ERR_SPMD_INVALID", `${op.stage}: ran with ${foreign}`);
    assert.equal(extra.message, `program.ops[${i}].${foreign}: not a field of op kind ${op.kind}`);
    for (const field of Object.keys(op)) {
      const { [field]: _, ...missing } = op;
      const e = await runAlone(one(missing));
      assert.equal(e?.code, "ERR_SPMD_INVALID", `${op.stage}: ran without ${field}`);
      assert.match(e.message, new RegExp(`^program\\.ops\\[${i}\\]\\.${field}: missing, expected `), e.message);
    }
  }
});
