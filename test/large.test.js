// Every stage at the sizes people train with: 16Mi and 64Mi float32 elements (64 and 256 MiB a rank), on
// every backend (W = 2, 3 and 8 on shm, 3 elsewhere: see WORLDS), each case run once and checked by the
// runner element by element (exact stages: 0 wrong) or against its error bound (estimating stages, whose relative errors must also
// agree across backends to 1e-6: the same inputs and algorithms give the same estimate on every transport).
// Then 256Mi elements at W=2, and messages over 2 GiB on shm, tcp and mpi. The small-size matrix lives in
// collectives.test.js and the per-backend suites; this file holds the expensive sizes.
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { ALL, EXACT, Mi, runLarge, STAGES } from "./helpers/large.js";
import { runJob, verifyStage } from "./helpers/onebit.js";
import { mpiMissing, mpirun, mpiTest } from "./helpers/mpi.js";
import { REPO, runRanks } from "./helpers/ranks.js";

const DOUBLES = path.join(REPO, "native/build/doubles");
const ESTIMATING = ALL.filter((id) => !EXACT.includes(id));
const ranks = (env = {}) => (W, args) => runRanks(W, args, { env, timeoutMs: 1_200_000 });

// backend -> how its ranks start, and what it runs. hccl's device has no kernels in this build (as on an Ascend
// NPU), so it runs the exact stages that need none: no 1-bit, quantized or mean stage (device-memory.test.js
// holds their refusal).
const BACKENDS = {
  shm: { launch: ranks(), ids: ALL },
  tcp: { launch: ranks(), ids: ALL },
  mpi: { launch: (W, args) => mpirun(W, args, { timeoutMs: 1_200_000 }), ids: ALL },
  nccl: { launch: ranks({ NCCL_LIBRARY: path.join(DOUBLES, "libspmd_nccl_double_full.so") }), ids: ALL },
  hccl: { launch: ranks({ HCCL_LIBRARY: path.join(DOUBLES, "libspmd_hccl_double.so") }), ids: EXACT.filter((id) => STAGES[id].stage.reduce !== "mean") },
};

// What fits CI's time on 2 cores (each case's CPU seconds are printed; a 16Mi case at W=4 takes about 40,
// half of it the kernel faulting fresh memory in): every stage at 16Mi on shm at W = 2, 3 and 8, on tcp, mpi
// and the NCCL and HCCL doubles at W = 3 (the doubles' exact stages run the double's own collectives). W = 3
// is the odd world whose blocks are uneven; the hierarchies that need an even W tile at 2 and 8 on shm, and
// they are one code over every transport's collectives. W = 4 on shm, tcp and mpi (130 of the file's 1040 CPU
// s) went when CI took 41 minutes on a slow machine.
// At 64Mi: on shm at W=2 the stages whose records and pieces scale with the message (1-bit, int8/int4 flat
// and hierarchical, shard and full; coalesced reduce_scatter; igather; all_to_all; broadcast) and the ring
// pair (allreduce, reduce_scatter, all_gather), and the scaling stages on tcp at W=3.
const SCALING = ["onebit", "int8_flat", "int4_hier_full", "int8_hier_full", "coalesced", "igather", "all_to_all", "broadcast"];
const WORLDS = { shm: [2, 3, 8], tcp: [3], mpi: [3], nccl: [3], hccl: [3] };
const AT_64MI = { shm: { 2: [...SCALING, "allreduce", "reduce_scatter", "all_gather"] }, tcp: { 3: SCALING }, mpi: {}, nccl: {}, hccl: {} };

// The estimating stages' relative errors per (W, n), from the first backend that ran them.
const estimates = new Map();

function agreeAcrossBackends(backend, W, n, rows) {
  for (const row of rows.filter((r) => ESTIMATING.includes(r.stage))) {
    const key = `${W}/${n}/${row.stage}`;
    if (!estimates.has(key)) estimates.set(key, { backend, e: row.rel_error });
    const first = estimates.get(key);
    assert.ok(Math.abs(row.rel_error - first.e) <= 1e-6 * first.e, `${key}: ${backend} ${row.rel_error} vs ${first.backend} ${first.e}`);
  }
}

for (const [backend, { launch, ids }] of Object.entries(BACKENDS)) {
  const define = backend === "mpi" ? mpiTest : (name, fn) => test(name, { timeout: 1_800_000 }, fn);
  for (const W of WORLDS[backend]) {
    const cases = [[16 * Mi, ids], ...(AT_64MI[backend][W] ? [[64 * Mi, AT_64MI[backend][W].filter((id) => ids.includes(id))]] : [])];
    for (const [n, run] of cases) {
      define(`${backend}, W=${W}, ${n / Mi}Mi elements: ${run.length === ids.length ? "every stage" : "the scaling stages"} (${run.length}) checked`, async () => {
        const rows = await runLarge(run, W, n, { launch, args: ["--backend", backend] });
        assert.deepEqual(rows.map((r) => r.stage).sort(), [...run].sort());
        agreeAcrossBackends(backend, W, n, rows);
      });
    }
  }
}

// The point-to-point algorithms by name on shm (the shared ones are its default above; tcp's default runs
// these same functions over sockets at every W above, and collectives.test.js names each at W = 1 to 8).
for (const W of [3]) {
  test(`shm, W=${W}, 16Mi elements: every exact stage with each named algorithm (ring, tree, direct)`, { timeout: 1_800_000 }, async () => {
    const extra = { sweep: { params: { algorithm: ["ring", "tree", "direct"] } } };
    const rows = await runLarge(EXACT, W, 16 * Mi, { launch: ranks(), args: ["--backend", "shm"], extra });
    const ran = new Set(rows.map((r) => `${r.stage}:${r.algorithm}`));
    for (const want of ["allreduce:ring", "allreduce:tree", "allreduce:direct", "reduce_scatter:ring", "all_gather:ring", "broadcast:tree", "gather:tree", "scatter:tree", "reduce:direct", "all_to_all:direct"]) {
      assert.ok(ran.has(want), `${want} did not run (ran ${[...ran].join(" ")})`);
    }
  });
}

// 4Mi at W=4 is where jobs/onebit.json first failed (a record of 128 KiB against a 64 KiB share of a slot);
// 16Mi at an odd W, records of 683 KiB. jobs.test.js runs onebit.json at W=4 up to 64Mi, checking its error.
for (const [W, n] of [[3, 16 * Mi], [4, 4 * Mi]]) {
  test(`compressed_allreduce on shm at W=${W}, ${n / Mi}Mi elements: output, worker and server errors element by element against the reference, 2 steps`, { timeout: 1_800_000 }, async () => {
    const job = {
      name: `onebit-${W}-${n}`, warmup: 1, iterations: 1,
      tensors: { g: { dtype: "float32", count: n, fill: { kind: "normal", seed: 21 } } },
      stages: [{ id: "onebit", op: "compressed_allreduce", input: "g" }],
    };
    const { doc, file } = await runJob(W, job, { typed: true });
    verifyStage(file, "onebit", W, 2);
    assert.equal(doc.results[0].count, n);
  });
}

// The exact allreduce (2.5 GB a rank with its check). The 1-bit stage here took 6.8 GB a rank and, beside
// the other tests, the machine's last memory; its records outgrow the shm slots already at 16Mi and 64Mi.
test("shm, W=2, 256Mi elements (1 GiB a rank): allreduce", { timeout: 1_800_000 }, async () => {
  const rows = await runLarge(["allreduce"], 2, 256 * Mi, { launch: ranks(), args: ["--backend", "shm"] });
  assert.equal(rows.length, 1);
});

// 2.25 GiB in one message (2^31 bytes and more): as int64 elements, so the check regenerates fewest values.
// On shm a broadcast, both ways it moves: single-copy (process_vm_readv moves at most 2 GiB a call) and
// staged. A broadcast holds one buffer a rank; an all_to_all or gather of this size would hold two or three.
const OVER_2GIB = 288 * Mi;
for (const [backend, stage, env] of [
  ["shm", "broadcast", {}], ["shm", "broadcast", { SPMD_SHM_SINGLE_COPY: "0" }], ["tcp", "send_recv", {}],
]) {
  const how = env.SPMD_SHM_SINGLE_COPY === "0" ? ", staged" : backend === "shm" ? ", single-copy" : "";
  test(`${backend}: a ${stage} of ${(OVER_2GIB * 8) / 2 ** 30} GiB in one message (W=2${how})`, { timeout: 1_800_000 }, async () => {
    await overTwoGiB(backend, stage, ranks(env));
  });
}
// On mpi a send_recv (one message through the transport, in 8-byte units under MPI's int count) and the
// library's broadcast. A ring allreduce here moved pieces of half the message, none past 2 GiB, for 87 CPU s.
mpiTest("mpi: a send_recv and the library's broadcast of 2.25 GiB (W=2)", async () => {
  for (const stage of ["send_recv", "broadcast"]) await overTwoGiB("mpi", stage, BACKENDS.mpi.launch);
});

async function overTwoGiB(backend, stage, launch) {
  const extra = { tensors: { big: { dtype: "int64", count: OVER_2GIB, fill: { kind: "integers", seed: 9, low: -1000, high: 1000 } } } };
  const op = { broadcast: { op: "broadcast", input: "big", root: 1 }, send_recv: { op: "send_recv", input: "big" } }[stage];
  const stages = { [stage]: { stage: op, out: 1 } };
  const rows = await runLarge([stage], 2, OVER_2GIB, { launch, args: ["--backend", backend], extra: { ...extra, stages } });
  assert.equal(rows[0].size, OVER_2GIB * 8);
}

if (mpiMissing && process.env.CI) test("CI runs the MPI cases", () => assert.fail(mpiMissing));
