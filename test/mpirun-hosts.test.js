// Real multi-host launches: Open MPI's mpirun starts the ranks on 2-3 network-namespace hosts
// (helpers/netns.js) through an ssh stand-in, each host with its own hostname, placed by `--map-by node`
// (round-robin), `--map-by slot` and a hostfile of unequal slots. Each run checks every element of the exact
// stages, quantized_allreduce against the float model with the hosts' real grouping (or its fallback when
// the hosts hold unequal numbers of ranks), the topology in results.json and the table's header, and that
// no process or namespace is left behind.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { prepareJob, verifyDumps } from "./helpers/matrix.js";
import { mpiMissing } from "./helpers/mpi.js";
import { launchIn, launcherAgent, namespacesLeft, netnsUnavailable, openMpi, processesIn, withHosts } from "./helpers/netns.js";
import { readDumps, verifyStage } from "./helpers/qgz.js";
import { envForMpi, REPO, RUNNER } from "./helpers/ranks.js";
import { requiredTest } from "./helpers/required.js";

const test = requiredTest("mpirun-hosts.test.js", netnsUnavailable() ?? mpiMissing);
const mpichTest = requiredTest("mpirun-hosts.test.js (MPICH)",
  netnsUnavailable() ?? (spawnSync("mpiexec.mpich", ["-version"]).error ? "mpiexec.mpich not found (install mpich libmpich-dev)" : undefined));
// The addon built for MPICH, next to the Open MPI one (native/build): only the addon, without the CUDA
// kernels or the test doubles, so the build costs as little as it can; an earlier one is reused.
const MPICH_BUILD = path.join(REPO, "native/build-mpich");

const STEPS = 3; // warmup + iterations, for the model
const EXACT = [
  { id: "ar", op: "allreduce", input: "t" },
  { id: "rs", op: "reduce_scatter", input: "t", reduce: "max" },
  { id: "bc", op: "broadcast", input: "t", root: 1 },
  { id: "empty", op: "allreduce", input: "z" },
];
const QUANTIZED = {
  q8: { op: "quantized_allreduce", input: "g", groupSize: 16 },
  q4full: { op: "quantized_allreduce", input: "g", bits: 4, reduce: "mean", output: "full", gatherBits: 8, groupSize: 32, errorFeedback: { beta: 0.5 } },
};

function job(W) {
  const integers = (seed) => ({ kind: "integers", seed, low: -9, high: 9 });
  return {
    name: `hosts-${W}`, warmup: 1, iterations: STEPS - 1, check: true,
    tensors: {
      t: { dtype: "float32", count: 1003, fill: integers(5) }, // not a multiple of any W here
      z: { dtype: "float32", count: 0 },
      g: { dtype: "float32", count: 100 * W, fill: { kind: "normal", seed: 7 } },
    },
    stages: [...EXACT, ...Object.entries(QUANTIZED).map(([id, s]) => ({ id, ...s }))],
  };
}

/** The header lines of the run's table.txt. */
function header(dir) {
  const runs = path.join(dir, "runs");
  const table = readFileSync(path.join(runs, readdirSync(runs)[0], "table.txt"), "utf8");
  return table.split("\n").slice(0, 2);
}

/**
 * Runs the job on `hosts` as the launcher places W ranks; checks the results against `want`: the hosts'
 * ranks, the backend, the table's header, and whether quantized_allreduce ran hierarchically or fell back.
 */
async function runAcross(hosts, { W, backend, want, ...how }) {
  const j = job(W);
  const { dir, json, dumpDir, run } = prepareJob(W, j, {
    dump: true, extraArgs: ["--backend", backend], launch: (_w, args) => launchIn(hosts, dir, W, how, ["run", ...args]),
  });
  try {
    const { code, out } = await run();
    assert.equal(code, 0, out);
    assert.deepEqual(processesIn(hosts), [], "processes left in the hosts");
    assert.doesNotMatch(out, /contradict/, "Open MPI's local ranks agree with the hosts");
    const doc = JSON.parse(readFileSync(json, "utf8"));
    const names = want.hosts.map((_, i) => hosts[i].name);
    assert.deepEqual(doc.topology.hosts, want.hosts.map((ranks, i) => ({ name: names[i], ranks })));
    const nodeOf = Array.from({ length: W }, (_, r) => want.hosts.findIndex((rs) => rs.includes(r)));
    assert.deepEqual(doc.ranks.map(({ host, node, local_rank }) => ({ host, node, local_rank })),
      nodeOf.map((node, r) => ({ host: names[node], node, local_rank: want.hosts[node].indexOf(r) })));
    assert.deepEqual(header(dir), [`# spmd-runner ${doc.version}: job hosts-${W}, ${W} ranks, backend ${want.backend}`, want.header]);
    // Every element of the exact stages, and the runner's own check of them.
    assert.ok(verifyDumps({ ...j, stages: EXACT }, W, dumpDir) >= 1003 * W, "elements compared");
    for (const { id } of EXACT) assert.equal(doc.results.find((r) => r.stage === id).wrong, 0, `${id}: #wrong`);
    const file = readDumps(j, W, dumpDir);
    for (const [id, s] of Object.entries(QUANTIZED)) {
      const row = doc.results.find((r) => r.stage === id);
      if (want.fallback) {
        assert.equal(row.fallback, `the hosts hold unequal numbers of ranks (${want.fallback}); ran the exact ${s.output === "full" ? "allreduce" : "reduce_scatter"}`);
        assert.equal(row.wrong, 0, `${id}: the exact collective's #wrong`);
      } else {
        const { errorFeedback, input: _, op: __, ...o } = s;
        verifyStage(doc, file, id, W, STEPS, { ...o, L: W / want.hosts.length, nodeOf, ...(errorFeedback && { beta: errorFeedback.beta }) });
      }
    }
    return { doc, header: header(dir) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The hosts, then nothing left of them. */
async function onHosts(count, body) {
  let made;
  await withHosts(count, async (hosts) => {
    made = hosts;
    await body(hosts);
  }, { ipv6: false });
  assert.deepEqual(namespacesLeft(made), [], "namespaces left behind");
}

test("mpirun --map-by node over 2 hosts: ranks 0,2 on hostA and 1,3 on hostB, backend mpi; qgZ groups by host", { timeout: 180_000 }, async () => {
  await onHosts(2, (hosts) => runAcross(hosts, { launcher: openMpi({ slots: [2, 2], mapBy: "node" }), W: 4, backend: "mpi", want: { hosts: [[0, 2], [1, 3]], backend: "mpi", header: "# 2 hosts: hostA (ranks 0,2), hostB (ranks 1,3)" } }));
});

test("mpirun --map-by slot over 2 hosts, backend auto (mpi under an MPI launcher)", { timeout: 180_000 }, async () => {
  await onHosts(2, (hosts) => runAcross(hosts, { launcher: openMpi({ slots: [2, 2], mapBy: "slot" }), W: 4, backend: "auto", want: { hosts: [[0, 1], [2, 3]], backend: "mpi", header: "# 2 hosts: hostA (ranks 0,1), hostB (ranks 2,3)" } }));
});

test("mpirun --map-by node over 3 hosts with 5 ranks: unequal hosts, qgZ falls back to the exact stage and says why", { timeout: 180_000 }, async () => {
  await onHosts(3, (hosts) =>
    runAcross(hosts, { launcher: openMpi({ slots: [2, 2, 2], mapBy: "node" }), W: 5, backend: "mpi", want: {
      hosts: [[0, 3], [1, 4], [2]], backend: "mpi", fallback: "2, 2, 1", header: "# 3 hosts: hostA (ranks 0,3), hostB (ranks 1,4), hostC (rank 2)",
    } }));
});

test("a hostfile of 3 + 1 slots, backend shm+tcp bootstrapped over MPI: shm within hostA, tcp to hostB", { timeout: 180_000 }, async () => {
  await onHosts(2, (hosts) =>
    runAcross(hosts, { launcher: openMpi({ slots: [3, 1], mapBy: "slot" }), W: 4, backend: "shm+tcp", want: {
      hosts: [[0, 1, 2], [3]], backend: "shm+tcp", fallback: "3, 1", header: "# 2 hosts: hostA (ranks 0-2), hostB (rank 3); links: 3 shm, 3 tcp",
    } }));
});

/** MPICH's mpiexec (Hydra) with `-ppn 1`: one rank per host in turn, so ranks go round-robin over the hosts. */
const mpiexec = (hosts, dir, W) => [
  "mpiexec.mpich", "-launcher", "ssh", "-launcher-exec", launcherAgent(hosts, dir), "-iface", "eth0",
  "-hosts", hosts.map((h) => `${h.ipv4}:2`).join(","), "-ppn", "1", "-n", String(W),
];

mpichTest("MPICH's mpiexec round-robin over 2 hosts, with the addon built for MPICH in its own build directory", { timeout: 600_000 }, async () => {
  // npm exec: the build sees npm's configuration (nodedir: the installed Node headers, no download).
  const build = spawnSync("npm", ["exec", "--offline", "--", "node", RUNNER, "build", "--out", MPICH_BUILD, "--target", "spmd_native",
    "-D", "MPI_C_COMPILER=mpicc.mpich", "-D", "SPMD_CUDA=OFF", "-D", "SPMD_BUILD_TEST_DOUBLES=OFF"], { cwd: REPO, encoding: "utf8" });
  assert.equal(build.status, 0, build.stdout + build.stderr);
  assert.match(build.stdout, /MPI backend: built \(MPI [\d.]+: \S*libmpich/);
  const env = { SPMD_BUILD_DIR: MPICH_BUILD };
  const info = spawnSync(process.execPath, [RUNNER, "info"], { cwd: REPO, env: { ...envForMpi(), ...env }, encoding: "utf8" }).stdout;
  assert.match(info, /^mpi: MPICH/m);
  await onHosts(2, async (hosts) => {
    for (const backend of ["mpi", "auto"]) {
      await runAcross(hosts, { launcher: mpiexec, env, W: 4, backend, want: { hosts: [[0, 2], [1, 3]], backend: "mpi", header: "# 2 hosts: hostA (ranks 0,2), hostB (ranks 1,3)" } });
    }
  });
});
