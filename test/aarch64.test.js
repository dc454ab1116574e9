// native/ on aarch64 (Grace/GH200, the Kunpeng hosts of Ascend NPUs): the C++ tests cross-compiled with
// Debian's g++-aarch64-linux-gnu (no MPI, no CUDA, no addon) and run by ctest under qemu-user; then every
// CPU kernel's output on fixed inputs, hashed, must be the same bits on aarch64 as on this x86-64 machine,
// whose side is built in the addon's build (native/build, as test/native.test.js does), over the floors the
// addon runs, compiled once.
// Needs g++-aarch64-linux-gnu and qemu-user-static: skipped without them, except in CI.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { closeSync, mkdtempSync, openSync, readSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after } from "node:test";
import { ADDON_BUILD, withNativeTests } from "./helpers/native-tests.js";
import { REPO } from "./helpers/ranks.js";
import { requiredTest } from "./helpers/required.js";

const TOOLCHAIN = path.join(REPO, "native/cmake/aarch64-linux-gnu.cmake");
const QEMU = ["qemu-aarch64-static", "-L", "/usr/aarch64-linux-gnu"];
const TMP = mkdtempSync(path.join(os.tmpdir(), "spmd-aarch64-"));
const CROSS = path.join(TMP, "aarch64");

function missing() {
  if (process.arch !== "x64") return `the x86-64 side of the comparison runs on x86-64, not ${process.arch}`;
  for (const [tool, pkg] of [["aarch64-linux-gnu-g++", "g++-aarch64-linux-gnu"], ["qemu-aarch64-static", "qemu-user-static"]]) {
    if (spawnSync(tool, ["--version"]).error) return `${tool} not found (apt-get install ${pkg})`;
  }
  return undefined;
}
const crossTest = requiredTest("aarch64.test.js", missing());

after(() => rmSync(TMP, { recursive: true, force: true }));

function run(cmd, args) {
  const p = spawnSync(cmd, args, { cwd: REPO, encoding: "utf8", timeout: 900_000, maxBuffer: 64 << 20 });
  assert.equal(p.status, 0, `${cmd} ${args.join(" ")} exited ${p.status}:\n${`${p.stdout}${p.stderr}`.slice(-4000)}`);
  return p.stdout;
}

/** The ELF header's machine field: 183 is aarch64, 62 x86-64. */
function elfMachine(file) {
  const fd = openSync(file, "r");
  const header = Buffer.alloc(20);
  readSync(fd, header, 0, 20, 0);
  closeSync(fd);
  return header.readUInt16LE(18);
}

/** Configures native/tests for aarch64 (without the vendor library layer: no NCCL or CUDA there) and builds them. */
function crossBuild() {
  run("cmake", ["-S", "native/tests", "-B", CROSS, "-DCMAKE_BUILD_TYPE=Release", "-DSPMD_TEST_LIBRARY=OFF", "-DSPMD_CUDA=OFF", "--toolchain", TOOLCHAIN]);
  run("cmake", ["--build", CROSS, "-j2"]);
}

crossTest("the C++ tests pass on aarch64 under qemu, and the CPU kernels give x86-64's bits", { timeout: 1_800_000 }, () => {
  crossBuild();
  assert.equal(elfMachine(path.join(CROSS, "kernel_digest")), 183, "the cross build did not make aarch64 code");
  const ctest = run("ctest", ["--test-dir", CROSS, "--output-on-failure"]);
  console.log(ctest.trim());
  for (const name of ["algorithms_w3", "flight", "tcp", "half", "shared", "onebit", "quant", "group"]) {
    assert.match(ctest, new RegExp(`Test +#\\d+: ${name} \\.+ +Passed`), `${name} did not pass under qemu`);
  }
  assert.match(ctest, /100% tests passed, 0 tests failed out of 8/);

  const digest = withNativeTests(run, (build) => {
    run("cmake", ["--build", ADDON_BUILD, "-j2", "--target", "kernel_digest"]);
    return path.join(build, "kernel_digest");
  });
  assert.equal(elfMachine(digest), 62);
  const x86 = run(digest, []);
  const arm = run(QEMU[0], [...QEMU.slice(1), path.join(CROSS, "kernel_digest")]);
  assert.equal(x86.trim().split("\n").length, 22, `expected 22 kernel digests:\n${x86}`);
  assert.equal(arm, x86, "aarch64's kernel outputs differ from x86-64's");
});
