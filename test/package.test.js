// The packed package as its users get it (README "Install"): `npm pack`, installs with no registry and an
// empty npm cache (the package bundles its dependencies), the quickstart from the installed command, one line
// and exit 2 where no addon fits, and `spmd-runner build` finding MPI installed after a first build without it.
// The last needs root (a mount namespace hides MPI) and mpirun: skipped otherwise, except in CI.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { pathToFileURL } from "node:url";
import { envForMpi, REPO } from "./helpers/ranks.js";
import { requiredTest } from "./helpers/required.js";

const TMP = mkdtempSync(path.join(os.tmpdir(), "spmd-package-"));
const EMPTY_CACHE = path.join(TMP, "npm-cache");
const GLOBAL = path.join(TMP, "global");
const LOCAL = path.join(TMP, "project");
const INSTALLED = path.join(LOCAL, "node_modules/spmd-runner");
const LOCAL_BIN = path.join(LOCAL, "node_modules/.bin/spmd-runner");
const PLATFORM = `${process.platform}-${process.arch}`;
// No registry: --offline with an empty cache fails at once on anything the package does not carry.
const NPM_OFFLINE = ["--offline", "--cache", EMPTY_CACHE, "--no-audit", "--no-fund"];
const ENV = envForMpi();
// better-sqlite3's binding for this Node, as the archive its install script (prebuild-install) unpacks.
const SQLITE_ARCHIVE = `prebuilds/sqlite/better-sqlite3-v${JSON.parse(readFileSync(path.join(REPO, "node_modules/better-sqlite3/package.json"), "utf8")).version}` +
  `-node-v${process.versions.modules}-${PLATFORM}.tar.gz`;

/** Runs cmd; asserts it exits with `status` (null: any). */
function run(cmd, args, { cwd = TMP, status = 0, timeout = 600_000, env = ENV } = {}) {
  const p = spawnSync(cmd, args, { cwd, env, encoding: "utf8", timeout, maxBuffer: 64 << 20 });
  const out = `${p.stdout}${p.stderr}`;
  if (status !== null) assert.equal(p.status, status, `${cmd} ${args.join(" ")} exited ${p.status}:\n${out.slice(-4000)}`);
  return p;
}

let tarball;
let files;

before(() => {
  // npm pack runs `prepare`: the build, and the addon copied into prebuilds/ for the package to carry.
  const packed = run("npm", ["pack", "--json", "--pack-destination", TMP], { cwd: REPO });
  // The build's output comes first on stdout; npm's JSON last.
  const [info] = JSON.parse(packed.stdout.slice(packed.stdout.search(/^\[\s*\{\s*"id"/m)));
  tarball = path.join(TMP, info.filename);
  files = info.files.map((f) => f.path);
  console.log(`${info.filename}: ${(statSync(tarball).size / 2 ** 20).toFixed(1)} MiB packed, ` +
    `${(info.unpackedSize / 2 ** 20).toFixed(1)} MiB unpacked, ${info.entryCount} files ` +
    `(${files.filter((f) => !f.startsWith("node_modules/")).length} outside the bundled node_modules)`);
});

after(() => rmSync(TMP, { recursive: true, force: true }));

test("the package holds the compiled CLI, schema, jobs, configs, scripts, README and the docs it links, native sources, the addon and its dependencies", () => {
  for (const f of ["runner/index.js", "dist/bundle/index.cjs", "dist/bundle/index.cjs.v8cache", "dist/bundle/charts.cjs", "dist/cli/index.js", "dist/cli/commands/build.js", "schema/job.schema.json",
    "jobs/quickstart.json", "configs/default.json", "scripts/slurm/one-node.sbatch", "scripts/lifecycle.mjs", "README.md", "docs/DESIGN.md",
    "native/CMakeLists.txt", "native/cmake/spmd_parts.cmake", "native/src/backends/shm/shm_transport.cc",
    "native/bench/kernels_bench.cc", `prebuilds/${PLATFORM}/spmd_native.node`, `prebuilds/${PLATFORM}/better_sqlite3.node`,
    SQLITE_ARCHIVE, ".prebuild-installrc",
    "node_modules/better-sqlite3/package.json", "experiments/backends.json", "node_modules/yargs/package.json",
    "node_modules/cmake-js/package.json", "node_modules/node-addon-api/package.json"]) {
    assert.ok(files.includes(f), `${f} is not in the package`);
  }
  const misplaced = files.filter((f) => /^(test|bench|src|native\/build|native\/tests|results|runs)\/|^[^/]+\.map$|^dist\/.*\.map$|^tsconfig/.test(f));
  assert.deepEqual(misplaced, [], "tests, bench results, sources of the JS, build trees or source maps in the package");
  // What only development needs, as the lockfile says (semver is a devDependency that runtime dependencies need too).
  const lock = JSON.parse(readFileSync(path.join(REPO, "package-lock.json"), "utf8")).packages;
  const dev = Object.keys(JSON.parse(readFileSync(path.join(REPO, "package.json"), "utf8")).devDependencies).filter((name) => lock[`node_modules/${name}`]?.dev);
  assert.ok(dev.includes("typescript") && !dev.includes("semver"), `the lockfile's development-only packages: ${dev.join(", ")}`);
  assert.deepEqual(dev.filter((name) => files.includes(`node_modules/${name}/package.json`)), [], "development dependencies bundled");
});

test("installed globally with no registry, `spmd-runner launch -n 4` runs the installed quickstart", async () => {
  run("npm", ["install", "-g", "--prefix", GLOBAL, tarball, ...NPM_OFFLINE]);
  // better-sqlite3's install script unpacked the packed binding instead of compiling SQLite (a minute here).
  const sqliteBuild = path.join(GLOBAL, "lib/node_modules/spmd-runner/node_modules/better-sqlite3/build/Release");
  assert.ok(existsSync(path.join(sqliteBuild, "better_sqlite3.node")), "better-sqlite3's install script did not run");
  assert.ok(!existsSync(path.join(sqliteBuild, "obj.target")), "SQLite was compiled at install");
  const bin = path.join(GLOBAL, "bin/spmd-runner");
  const info = run(bin, ["info"]);
  assert.match(info.stdout, new RegExp(`^addon: .*prebuilds/${PLATFORM}/spmd_native.node \\(prebuilt for ${PLATFORM}\\)$`, "m"));
  const job = path.join(GLOBAL, "lib/node_modules/spmd-runner/jobs/quickstart.json");
  const p = run(bin, ["launch", "-n", "4", job, "--out", path.join(TMP, "results")], { timeout: 300_000 });
  console.log(p.stdout.trim());
  assert.match(p.stdout, /# Out of bounds values : 0 OK/);
  assert.match(p.stdout, /allreduce\s+allreduce\s+\S+\s+4194304\s+1048576\s+float32\s+sum/);
  // The packed code cache, made by this Node: the installed ranks compile their bundle from it.
  const { loadBundle } = await import(pathToFileURL(path.join(GLOBAL, "lib/node_modules/spmd-runner/runner/bundle.js")).href);
  assert.equal(loadBundle().cached, true, "the installed bundle compiles from the packed code cache");
  // A campaign indexed in SQLite with the binding the package carries.
  writeFileSync(path.join(TMP, "tiny.json"), JSON.stringify({ name: "tiny", iterations: 1, warmup: 0, tensors: { t: { dtype: "float32", count: 16 } }, stages: [{ id: "ar", op: "allreduce", input: "t" }] }));
  writeFileSync(path.join(TMP, "exp.json"), JSON.stringify({ name: "tiny", jobs: ["tiny.json"], matrix: { backend: ["shm"], world_size: [2] } }));
  run(bin, ["exp", "run", path.join(TMP, "exp.json"), "--dir", path.join(TMP, "campaign")], { timeout: 300_000 });
  assert.equal(run(bin, ["exp", "query", "SELECT count(*) AS n FROM rows", "--dir", path.join(TMP, "campaign"), "--format", "csv"]).stdout, "n\n1\n");
});

test("installed in a project, npx runs it; with no addon that loads, the first command says in one line what to run, exit 2", () => {
  mkdirSync(LOCAL);
  writeFileSync(path.join(LOCAL, "package.json"), JSON.stringify({ name: "uses-spmd-runner", version: "1.0.0", private: true }));
  run("npm", ["install", tarball, ...NPM_OFFLINE], { cwd: LOCAL });
  assert.match(run("npx", ["--offline", "spmd-runner", "info"], { cwd: LOCAL }).stdout, /^backends: shm=built tcp=built/m);

  const prebuilt = path.join(INSTALLED, "prebuilds", PLATFORM, "spmd_native.node");
  const expectOneLine = (args, pattern) => {
    const p = run("npx", ["--offline", "spmd-runner", ...args], { cwd: LOCAL, status: 2 });
    assert.equal(p.stdout, "");
    // npm's own warnings (about this machine's npm config, say) aside, the one line.
    const lines = p.stderr.split("\n").filter((l) => l && !l.startsWith("npm warn"));
    assert.equal(lines.length, 1, p.stderr);
    assert.match(lines[0], pattern);
  };
  const build = "; run `spmd-runner build` \\(needs CMake and a C\\+\\+ compiler\\)$";
  renameSync(prebuilt, path.join(TMP, "spmd_native.node"));
  for (const args of [["info"], ["launch", "-n", "4", path.join(INSTALLED, "jobs/quickstart.json")]]) {
    expectOneLine(args, new RegExp(`^runner: no native addon built or packed for ${PLATFORM}${build}`));
  }
  // One that does not load here (as where it links a libmpi this machine lacks): the loader's reason.
  writeFileSync(prebuilt, "not a shared object");
  expectOneLine(["info"], new RegExp(`^runner: the addon prebuilt for ${PLATFORM} does not load: [^\n]*${build}`));
});

function mpiBuildMissing() {
  if (process.getuid?.() !== 0) return "not root (a mount namespace hides MPI from the first build)";
  if (spawnSync("mpirun", ["--version"]).error) return "mpirun not found (install openmpi-bin libopenmpi-dev)";
  if (spawnSync("unshare", ["--version"]).error) return "unshare not found (util-linux)";
  return undefined;
}
const mpiTest = requiredTest("package.test.js (adding MPI later)", mpiBuildMissing());

/** Open MPI's files, as `mpicc` names them: with these covered, the machine looks as if it had no MPI. */
function openMpiDirs() {
  const libdir = run("mpicc", ["--showme:libdirs"]).stdout.trim().split(/\s+/)[0];
  return [path.dirname(libdir), "/usr/share/openmpi"].filter((d) => existsSync(d));
}

// The addon alone, no CUDA kernels: all this test needs, built twice with the same command.
const BUILD = ["spmd-runner", "build", "--target", "spmd_native", "-D", "SPMD_CUDA=OFF"];

/** CCACHE_DIR as ccache has it here, where ccache is installed. */
function ccacheDir() {
  const p = spawnSync("ccache", ["--get-config", "cache_dir"], { encoding: "utf8" });
  return p.status === 0 ? { CCACHE_DIR: p.stdout.trim() } : {};
}

mpiTest("a build without MPI, then MPI installed, then the same build again: the MPI backend appears", () => {
  const hide = openMpiDirs().map((d) => `mount -t tmpfs none ${d}`).join(" && ");
  // Without a network too (-n), and as the installed command alone, with no npm nodedir (npx passes npm's)
  // nor cmake-js' cache of downloaded headers: the running Node's own headers serve.
  // ccache's cache stays where HOME had it, as a user's would: it is not what the empty HOME is for.
  const offline = { ...Object.fromEntries(Object.entries(ENV).filter(([k]) => !/^npm_config_/i.test(k))), HOME: TMP, ...ccacheDir() };
  const first = run("unshare", ["-m", "-n", "sh", "-c", `${hide} && exec ${LOCAL_BIN} ${BUILD.slice(1).join(" ")}`], { cwd: LOCAL, env: offline });
  assert.match(first.stdout, /spmd: {3}MPI backend: skipped \(no MPI found: install Open MPI or MPICH/);
  assert.match(first.stdout, /spmd: {3}CUDA kernels: skipped \(SPMD_CUDA=OFF\)/);

  const underMpi = run("mpirun", ["--allow-run-as-root", "--oversubscribe", "-np", "2", LOCAL_BIN, "info"], { cwd: LOCAL });
  assert.match(underMpi.stdout.split("\n")[0], /^launched by openmpi, but this build has no MPI backend .*run `spmd-runner build`$/);
  assert.match(underMpi.stdout, /^backends: shm=built tcp=built mpi=not built/m);
  const job = path.join(INSTALLED, "jobs/quickstart.json");
  const runUnderMpi = run("mpirun", ["--allow-run-as-root", "--oversubscribe", "-np", "2", LOCAL_BIN, job], { cwd: LOCAL, status: null });
  const rank0 = runUnderMpi.stderr.split("\n").filter((l) => /[[(]rank 0[\])]/.test(l));
  assert.match(rank0[0], /^\[rank 0\] warn: launched by openmpi, but this build has no MPI backend .*run `spmd-runner build`$/);

  const second = run("npx", ["--offline", ...BUILD], { cwd: LOCAL });
  assert.match(second.stdout, /spmd: {3}MPI backend: built \(MPI [\d.]+: \S*libmpi/);
  const info = run("npx", ["--offline", "spmd-runner", "info"], { cwd: LOCAL }).stdout;
  assert.match(info, /^addon: .*native\/build\/Release\/spmd_native.node \(built here\)$/m);
  assert.match(info, /^backends: shm=built tcp=built mpi=built/m);
  assert.match(info, /^mpi: Open MPI/m);

  const p = run("mpirun", ["--allow-run-as-root", "--oversubscribe", "-np", "4", LOCAL_BIN, job, "--out", path.join(TMP, "results")],
    { cwd: LOCAL, timeout: 300_000 });
  assert.match(p.stdout, /# Out of bounds values : 0 OK/);
  assert.match(p.stdout, /^\s+allreduce\s+allreduce\s+mpi\s/m);
});
