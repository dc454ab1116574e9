// The C++ tests (native/tests) built inside the addon's build tree (SPMD_TESTS), so the floors the addon
// already compiled are reused; test/native.test.js runs them all, test/aarch64.test.js takes x86-64's side of
// its comparison from there.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import path from "node:path";
import { REPO } from "./ranks.js";

export const ADDON_BUILD = path.join(REPO, "native/build");

/** Configures native/build with the C++ tests, runs body(their build directory), then configures it without. */
export function withNativeTests(run, body) {
  assert.ok(existsSync(path.join(ADDON_BUILD, "CMakeCache.txt")), "native/build is not configured: run `npm run build` first");
  run("cmake", ["-S", "native", "-B", ADDON_BUILD, "-DSPMD_TESTS=ON"]);
  try {
    return body(path.join(ADDON_BUILD, "ctest"));
  } finally {
    // Later builds of the addon (`npm run build`, `npm pack`) build the addon alone again.
    run("cmake", ["-S", "native", "-B", ADDON_BUILD, "-DSPMD_TESTS=OFF"]);
  }
}
