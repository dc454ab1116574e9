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
