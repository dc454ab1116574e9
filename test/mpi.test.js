// The MPI backend and the MPI bootstrap under a real `mpirun`: every stage at 2, 3, 4 and 8 ranks (8 on
// 2 cores) checked element by element against the reference in helpers/matrix.js, MPI's "auto" and the
// named algorithms alike; shm and tcp bootstrapped over MPI giving byte-identical results; the quick start;
// `runner info`; a deadline that fires. Without mpirun or an MPI build these tests are skipped with the
// reason, except in CI (CI set), where that is a failure.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { mpichCrowdedNote, planStart } from "../dist/comm/open.js";
import { discoverPlace } from "../dist/env/discover.js";
import { bigJob, prepareJob, smallJob, verifyDumps } from "./helpers/matrix.js";
import { mpirun, mpiTest } from "./helpers/mpi.js";
import { readNpy } from "./helpers/npy.js";
import { qgzReference, qgzWireBytes } from "./helpers/qgz.js";
import { envForMpi, REPO, RUNNER, runNode } from "./helpers/ranks.js";
import { withTempDir } from "./helpers/tmp.js";

const TABLE_HEAD = /# stage +op +algo +size +count +type +redop +root +time +algbw +busbw +#wrong/;

test("MPICH with more ranks than cores: one line says what will happen and the remedy; Open MPI, other backends and a core each say nothing", () => {
  const mpich = "MPICH Version:      4.0\nMPICH Release date: Fri Jan 21 10:42:29 CST 2022";
  assert.match(mpichCrowdedNote("mpi (MPI_THREAD_MULTIPLE, 2 lanes)", mpich, 4, 2), /^MPICH with 4 ranks on 2 cores: MPICH polls without yielding .*; run with ranks <= cores, or under Open MPI's mpirun, which yields$/);
  assert.equal(mpichCrowdedNote("mpi (MPI_THREAD_MULTIPLE, 2 lanes)", mpich, 2, 2), undefined);
  assert.equal(mpichCrowdedNote("mpi (MPI_THREAD_MULTIPLE, 2 lanes)", "Open MPI v4.1.6, package: Debian OpenMPI", 4, 2), undefined);
  assert.equal(mpichCrowdedNote("shm", mpich, 4, 2), undefined);
});

test("backend and bootstrap rules: auto is mpi under an MPI launcher when built, else decided by the hosts; shm/tcp meet over MPI without MASTER_*", () => {
  const openmpi = { OMPI_COMM_WORLD_RANK: "1", OMPI_COMM_WORLD_SIZE: "4", OMPI_COMM_WORLD_LOCAL_RANK: "1", OMPI_COMM_WORLD_LOCAL_SIZE: "4" };
  const master = { MASTER_ADDR: "127.0.0.1", MASTER_PORT: "29500" };
  const slurm = { SLURM_PROCID: "1", SLURM_NTASKS: "4", SLURM_LOCALID: "1", SLURM_NTASKS_PER_NODE: "4", SLURM_NODEID: "0" };
  const torchrun = { RANK: "1", WORLD_SIZE: "4", LOCAL_RANK: "1", LOCAL_WORLD_SIZE: "4", ...master };
  const plan = (env, requested = "auto", built = ["shm", "tcp", "mpi"]) => {
    const place = discoverPlace(env);
    try {
      return planStart({ requested, place, env, built, master: place.master ?? {} });
    } catch (err) {
      return err.message;
    }
  };
  assert.deepEqual(plan(openmpi), { backend: "mpi", bootstrap: "mpi" });
  assert.deepEqual(plan({ ...openmpi, ...master }), { backend: "mpi", bootstrap: "mpi" });
  assert.deepEqual(plan(openmpi, "shm"), { backend: "shm", bootstrap: "mpi" });
  assert.deepEqual(plan({ ...openmpi, ...master }, "shm"), { backend: "shm", bootstrap: "tcp" });
  assert.deepEqual(plan({ ...slurm, PMIX_RANK: "1" }), { backend: "mpi", bootstrap: "mpi" });
  assert.match(plan(slurm), /need MASTER_ADDR and MASTER_PORT/, "srun without PMI: MPI would not find the job");
  assert.deepEqual(plan({ ...slurm, SLURM_STEP_NODELIST: "node[01-02]", MASTER_PORT: "29500" }), { backend: "auto", bootstrap: "tcp" });
  assert.deepEqual(plan(torchrun), { backend: "auto", bootstrap: "tcp" });
  assert.deepEqual(plan(torchrun, "tcp"), { backend: "tcp", bootstrap: "tcp" });
  assert.deepEqual(plan(openmpi, "tcp"), { backend: "tcp", bootstrap: "mpi" });
  assert.deepEqual(plan({}), { backend: "shm", bootstrap: "none" });
  assert.match(plan(torchrun, "mpi"), /^backend mpi: needs an MPI launcher .* started by torchrun$/);
  // Without the MPI build: auto is decided by the hosts, and the ranks then need the TCP store to meet.
  assert.deepEqual(plan({ ...openmpi, ...master }, "auto", ["shm", "tcp"]), { backend: "auto", bootstrap: "tcp" });
  assert.match(plan(openmpi, "auto", ["shm", "tcp"]), /need MASTER_ADDR and MASTER_PORT .*; meeting over MPI instead needs the mpi backend/);
  assert.match(plan(openmpi, "mpi", ["shm", "tcp"]), /^backend mpi is not available in this build \(built: shm, tcp\)/);
});

// The runner's own segments (src/comm/start-shm.ts names them spmd-<pid>-<12 hex digits>), not the NCCL and HCCL
// doubles' (spmd-double-...), which tests in another lane of CI hold while this one runs.
const ours = () => readdirSync("/dev/shm").filter((f) => /^spmd-\d+-[0-9a-f]{12}$/.test(f));

/**
 * Runs `body`, then checks that no shared-memory segment it made is left (rank pids are mpirun's to know). A test
 * in another lane holds its segment from creating it until its ranks attached: a leak is one still there 2 s on.
 */
async function noLeftovers(body) {
  const before = new Set(ours());
  await body();
  const left = () => ours().filter((f) => !before.has(f));
  for (let waited = 0; waited < 2000 && left().length; waited += 100) await new Promise((r) => setTimeout(r, 100));
  assert.deepEqual(left(), [], "shared-memory segments left behind");
}

function results(json) {
  return JSON.parse(readFileSync(json, "utf8"));
}

for (const W of [2, 3, 4, 8]) {
  mpiTest(`mpi backend, every stage (MPI's own and the named algorithms), counts 0/1/7/1003, every dtype, W=${W}`, async () => {
    const job = smallJob(W, { auto: true });
    const { dir, json, dumpDir, run } = prepareJob(W, job, { dump: true, launch: mpirun });
    try {
      await noLeftovers(async () => {
        const p = await run();
        assert.equal(p.code, 0, p.stderr);
      });
      const doc = results(json);
      assert.equal(doc.backend, "mpi");
      assert.equal(doc.world_size, W);
      assert.equal(doc.results.length, job.stages.length);
      for (const row of doc.results) {
        if (row.type) assert.equal(row.wrong, 0, `${row.stage}: runner's check found ${row.wrong} wrong`);
        const stage = job.stages.find((s) => s.id === row.stage);
        const named = stage.algorithm && !["all_to_all", "send_recv", "barrier"].includes(stage.op);
        assert.equal(row.algorithm, stage.op === "compute" ? "auto" : named ? stage.algorithm : "mpi", `${row.stage}: algorithm`);
      }
      assert.ok(verifyDumps(job, W, dumpDir) > 1000 * W);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

for (const W of [3, 8]) {
  mpiTest(`mpi backend, every stage at count 1000003, W=${W}: runner's check finds 0 wrong`, async () => {
    const job = bigJob(W, { auto: true });
    const { dir, json, run } = prepareJob(W, job, { launch: mpirun });
    try {
      const p = await run();
      assert.equal(p.code, 0, p.stderr);
      for (const row of results(json).results) assert.equal(row.wrong, 0, `${row.stage}: ${row.wrong} wrong`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

mpiTest("MPI_THREAD_FUNNELED (SPMD_MPI_THREAD_LEVEL=funneled): one lane, igather posted on it, every stage exact, W=3", async () => {
  const W = 3;
  const job = smallJob(W, { auto: true });
  const { dir, json, dumpDir, run } = prepareJob(W, job, {
    dump: true,
    launch: (n, args) => mpirun(n, [...args, "--log-level", "debug"], { env: { SPMD_MPI_THREAD_LEVEL: "funneled" } }),
  });
  try {
    const p = await run();
    assert.equal(p.code, 0, p.stderr);
    assert.match(p.stderr, /backend mpi \(MPI_THREAD_FUNNELED, 1 lane\), bootstrap mpi/);
    const rows = results(json).results;
    for (const row of rows) if (row.type) assert.equal(row.wrong, 0, `${row.stage}: ${row.wrong} wrong`);
    assert.equal(rows.find((r) => r.op === "igather" && r.count === 3 * 1003).algorithm, "mpi");
    verifyDumps(job, W, dumpDir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

mpiTest("shm and tcp bootstrapped over MPI (no MASTER_ADDR/MASTER_PORT) give byte-identical outputs to the mpi backend, W=4", async () => {
  const W = 4;
  const job = smallJob(W, { auto: true });
  const dumps = {};
  const dirs = [];
  try {
    for (const backend of ["shm", "tcp", "mpi"]) {
      const { dir, json, dumpDir, run } = prepareJob(W, job, { dump: true, launch: mpirun, extraArgs: ["--backend", backend] });
      dirs.push(dir);
      await noLeftovers(async () => {
        const p = await run();
        assert.equal(p.code, 0, `${backend}: ${p.stderr}`);
      });
      assert.equal(results(json).backend, backend);
      dumps[backend] = dumpDir;
    }
    let files = 0;
    for (const stage of readdirSync(dumps.mpi)) {
      const names = readdirSync(path.join(dumps.mpi, stage)).sort();
      for (const backend of ["shm", "tcp"]) {
        assert.deepEqual(readdirSync(path.join(dumps[backend], stage)).sort(), names, `${stage}: the same files`);
        for (const name of names) {
          const a = readFileSync(path.join(dumps[backend], stage, name));
          const b = readFileSync(path.join(dumps.mpi, stage, name));
          assert.ok(a.equals(b), `${stage}/${name} differs between ${backend} and mpi`);
          files++;
        }
      }
    }
    assert.ok(files > 2 * job.stages.length * W, `compared only ${files} files`);
  } finally {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  }
});

mpiTest("quantized_allreduce on the mpi backend (sub-communicators from MPI_Comm_split), as 2 nodes × 2 and as Open MPI's one node of 4: outputs match the float32 model", async () => {
  const W = 4, n = 800;
  const cases = {
    nodes: { L: 2, groupSize: 64, beta: 1 },
    launcher: { L: 4, bits: 4, groupSize: 48, output: "full", reduce: "mean" },
  };
  const job = {
    name: "qgz-mpi", warmup: 1, iterations: 1,
    tensors: { g: { dtype: "float32", count: n, fill: { kind: "normal", seed: 5 } } },
    stages: [
      { id: "nodes", op: "quantized_allreduce", input: "g", nodes: 2, groupSize: 64, errorFeedback: {} },
      { id: "launcher", op: "quantized_allreduce", input: "g", bits: 4, groupSize: 48, output: "full", reduce: "mean" },
    ],
  };
  const { dir, json, dumpDir, run } = prepareJob(W, job, { dump: true, launch: mpirun });
  try {
    const p = await run();
    assert.equal(p.code, 0, p.stderr);
    const doc = results(json);
    assert.equal(doc.backend, "mpi");
    for (const [id, o] of Object.entries(cases)) {
      const load = (r, what) => readNpy(path.join(dumpDir, id, `rank${r}.${what}.npy`)).values;
      const ref = qgzReference(Array.from({ length: W }, (_, r) => load(r, "input")), { ...o, steps: 2 });
      for (let r = 0; r < W; r++) assert.deepEqual(load(r, "output"), ref.outs[r], `${id} rank ${r}`);
      assert.equal(doc.results.find((x) => x.stage === id).wire_bytes, qgzWireBytes({ W, n, ...o }), `${id}: wire bytes`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

mpiTest("mpirun -np 8 --oversubscribe node runner jobs/quickstart.json prints the table with zero wrong", () =>
  withTempDir("spmd-mpi-", async (out) => {
    const json = path.join(out, "r.json");
    await noLeftovers(async () => {
      const p = await mpirun(8, ["jobs/quickstart.json", "--out", out, "--json", json]);
      assert.equal(p.code, 0, p.stderr);
      assert.match(p.stdout, TABLE_HEAD);
      assert.match(p.stdout, /job quickstart, 8 ranks, backend mpi/);
      assert.match(p.stdout, /# Out of bounds values : 0 OK/);
    });
    const doc = results(json);
    assert.equal(doc.world_size, 8);
    assert.ok(doc.results.every((r) => r.wrong === 0 || r.wrong === null), "0 wrong");
    // What the runner set before MPI_Init, as the manifest records it: 8 ranks on fewer cores yield when
    // idle, and UCX rewrites no libc code while Node's thread runs (a user's own setting wins: next test).
    assert.equal(doc.manifest.env.OMPI_MCA_mpi_yield_when_idle, "1");
    assert.equal(doc.manifest.env.UCX_MEM_MMAP_HOOK_MODE, "none");
    assert.equal(doc.manifest.env.UCX_MEM_MALLOC_HOOKS, "no");
  }));

mpiTest("a user's UCX hook and yield settings are kept: the runner sets only what the user left unset", () =>
  withTempDir("spmd-mpi-", async (out) => {
    const json = path.join(out, "r.json");
    const env = { UCX_MEM_MMAP_HOOK_MODE: "reloc", UCX_MEM_MALLOC_HOOKS: "yes", OMPI_MCA_mpi_yield_when_idle: "0" };
    const p = await mpirun(2, ["jobs/quickstart.json", "--backend", "mpi", "--iterations", "1", "--warmup", "0", "--out", out, "--json", json], { env });
    assert.equal(p.code, 0, p.stderr);
    const { manifest } = results(json);
    assert.equal(manifest.env.UCX_MEM_MMAP_HOOK_MODE, "reloc");
    assert.equal(manifest.env.UCX_MEM_MALLOC_HOOKS, "yes");
    assert.equal(manifest.env.OMPI_MCA_mpi_yield_when_idle, "0");
  }));

mpiTest("runner info under mpirun: the MPI backend is built and the place comes from Open MPI", async () => {
  const p = await mpirun(2, ["info"]);
  assert.equal(p.code, 0, p.stderr);
  assert.equal(p.stdout.match(/mpi=built/g)?.length, 2, p.stdout);
  assert.match(p.stdout, /launcher: openmpi; rank 0 of 2/);
  assert.match(p.stdout, /launcher: openmpi; rank 1 of 2/);
  assert.match(p.stdout, /auto: backend mpi, bootstrap mpi/);
  assert.match(p.stdout, /mpi: Open MPI v\d/);
});

mpiTest("a stage past its deadline fails every rank with ERR_SPMD_TIMEOUT's message naming the stage and the MPI call", () =>
  withTempDir("spmd-mpi-", async (dir) => {
    const job = path.join(dir, "deadline.json");
    writeFileSync(job, JSON.stringify({
      name: "deadline", iterations: 1, warmup: 0,
      tensors: { t: { dtype: "float32", count: "16Mi" } },
      stages: [{ id: "slow", op: "allreduce", input: "t", timeoutSec: 0.001 }],
    }));
    await noLeftovers(async () => {
      const p = await mpirun(4, [job, "--out", dir], { timeoutMs: 120_000 });
      assert.notEqual(p.code, 0);
      assert.match(p.stderr, /stage slow: deadline passed while waiting for MPI_I?allreduce of 67108864 bytes/i);
      assert.ok(p.ms < 60_000, `took ${p.ms} ms`);
    });
  }));

mpiTest("backend mpi without an MPI launcher is one line and exit code 2", async () => {
  const p = await runNode([RUNNER, "jobs/quickstart.json", "--backend", "mpi"]);
  assert.equal(p.code, 2, p.stderr);
  // The rank's own log line may precede it; the error is one line, the last.
  assert.match(p.stderr, /\nrunner: backend mpi: needs an MPI launcher \(mpirun, mpiexec or srun --mpi=pmix\); this process was started by none\n$/);
});

mpiTest("an Open MPI addon under MPICH's mpiexec says it was built for Open MPI and how to build for MPICH", async () => {
  const info = await runNode([RUNNER, "info"]);
  const mpichExec = spawnSync("mpiexec.mpich", ["--version"]).error === undefined;
  if (!/^mpi: Open MPI/m.test(info.stdout) || !mpichExec) {
    assert.ok(!process.env.CI || mpichExec, "CI must have MPICH's mpiexec beside Open MPI");
    return;
  }
  await withTempDir("spmd-mpich-", async (dir) => {
    const p = spawnSync("mpiexec.mpich", ["-n", "2", process.execPath, RUNNER, smallJobFile(dir), "--out", dir],
      { cwd: REPO, env: envForMpi(), encoding: "utf8", timeout: 60_000 });
    assert.notEqual(p.status, 0);
    for (const rank of [0, 1]) {
      assert.match(p.stderr, new RegExp(`^runner \\(rank ${rank}\\): bootstrap: MPI says rank 0 of 1, the launcher's environment rank ${rank} of 2: ` +
        "this addon was built for Open MPI v[\\d.]+, not for the MPI of this launcher \\(mpich\\); build one for MPICH: " +
        "SPMD_BUILD_DIR=native/build-mpich node runner build -D MPI_C_COMPILER=mpicc.mpich, then run with SPMD_BUILD_DIR=native/build-mpich set$", "m"), p.stderr);
    }
  });
});

function smallJobFile(dir) {
  const file = path.join(dir, "small.json");
  writeFileSync(file, JSON.stringify({ name: "small", iterations: 1, warmup: 0, tensors: { t: { dtype: "float32", count: 8 } }, stages: [{ id: "ar", op: "allreduce", input: "t" }] }));
  return file;
}
