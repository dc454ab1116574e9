// Tests that need something of the machine (root, mpirun, a cross compiler): skipped with the reason where it
// is missing, except in CI (CI set), where a test that cannot run is a failure.
import assert from "node:assert/strict";
import { test } from "node:test";

/** node:test's `test(name, [options], fn)` for a suite whose requirement is `missing` (a reason, or undefined when met). */
export function requiredTest(file, missing) {
  if (missing && !process.env.CI) console.log(`# ${file} skipped: ${missing}`);
  return (name, options, fn = options) =>
    test(name, { ...(options === fn ? {} : options), skip: missing && !process.env.CI ? missing : false }, async () => {
      if (missing) assert.fail(`CI must run ${file}: ${missing}`);
      await fn();
    });
}
