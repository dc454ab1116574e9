// The C++ tests (native/tests: algorithms over a threaded transport double, kernels, the nccl backend over
// the NCCL ABI double at world size 1) built and run by ctest, so CI counts them with the rest of the suite.
// The CUDA kernel test is built where nvcc is, and skips itself without a GPU.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { test } from "node:test";
import { ADDON_BUILD, withNativeTests } from "./helpers/native-tests.js";
import { REPO } from "./helpers/ranks.js";

// nccl_test runs over the library NCCL_LIBRARY names (skipping itself without one): here, the double.
const NCCL_DOUBLE = path.join(REPO, "native/build/doubles/libspmd_nccl_double_full.so");

function run(cmd, args) {
  const env = { ...process.env, NCCL_LIBRARY: NCCL_DOUBLE };
  const p = spawnSync(cmd, args, { cwd: REPO, encoding: "utf8", timeout: 900_000, env });
  assert.equal(p.status, 0, `${cmd} ${args.join(" ")} failed:\n${p.stdout}\n${p.stderr}`);
  return p.stdout;
}

test("C++ algorithm and kernel tests pass under ctest", { timeout: 1_200_000 }, () => {
  withNativeTests(run, (build) => {
    run("cmake", ["--build", ADDON_BUILD, "-j2"]);
    const out = run("ctest", ["--test-dir", build, "--output-on-failure"]);
    assert.match(out, /100% tests passed, 0 tests failed out of \d+/);
  });
});
