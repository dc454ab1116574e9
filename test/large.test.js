// Every stage at the sizes people train with: 16Mi and 64Mi float32 elements (64 and 256 MiB a rank), on
// every backend, at W = 2, 3, 4 and 8, each case run once and checked by the runner element by element
// (exact stages: 0 wrong) or against its error bound (estimating stages, whose relative errors must also
// agree across backends to 1e-6: the same inputs and algorithms give the same estimate on every transport).
// Then 256Mi elements at W=2, and messages over 2 GiB on shm, tcp and mpi. The small-size matrix lives in
// collectives.test.js and the per-backend suites; this file holds the expensive sizes.
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { ALL, EXACT, Mi, runLarge } from "./helpers/large.js";
import { mpiMissing, mpirun, mpiTest } from "./helpers/mpi.js";
import { REPO, runRanks } from "./helpers/ranks.js";

const DOUBLES = path.join(REPO, "native/build/doubles");
const ESTIMATING = ALL.filter((id) => !EXACT.includes(id));
const ranks = (env = {}) => (W, args) => runRanks(W, args, { env, timeoutMs: 1_200_000 });

// backend -> how its ranks start, and what it runs. hccl has no sub-communicators, so no quantized stage.
const BACKENDS = {
  shm: { launch: ranks(), ids: ALL },
  tcp: { launch: ranks(), ids: ALL },
  mpi: { launch: (W, args) => mpirun(W, args, { timeoutMs: 1_200_000 }), ids: ALL },
  nccl: { launch: ranks({ NCCL_LIBRARY: path.join(DOUBLES, "libspmd_nccl_double_full.so") }), ids: ALL },
  hccl: { launch: ranks({ HCCL_LIBRARY: path.join(DOUBLES, "libspmd_hccl_double.so") }), ids: ALL.filter((id) => !id.startsWith("int")) },
};

// Which (backend, W) pairs also run at 64Mi: shm at every W, each other backend at one W, so every W sees
// three backends at 64Mi.
const AT_64MI = { shm: [2, 3, 4, 8], tcp: [4, 8], mpi: [3, 8], nccl: [2, 4], hccl: [3] };

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
  for (const W of [2, 3, 4, 8]) {
    for (const n of [16 * Mi, ...(AT_64MI[backend].includes(W) ? [64 * Mi] : [])]) {
      define(`${backend}, W=${W}, ${n / Mi}Mi elements: every stage (${ids.length}) checked`, async () => {
        const rows = await runLarge(ids, W, n, { launch, args: ["--backend", backend] });
        assert.deepEqual(rows.map((r) => r.stage).sort(), [...ids].sort());
        agreeAcrossBackends(backend, W, n, rows);
      });
    }
  }
}

// The point-to-point algorithms by name on shm (the shared ones are the default above).
for (const W of [2, 3, 4, 8]) {
  test(`shm, W=${W}, 16Mi elements: every exact stage with each named algorithm (ring, tree, direct)`, { timeout: 1_800_000 }, async () => {
    const extra = { sweep: { params: { algorithm: ["ring", "tree", "direct"] } } };
    const rows = await runLarge(EXACT, W, 16 * Mi, { launch: ranks(), args: ["--backend", "shm"], extra });
    const ran = new Set(rows.map((r) => `${r.stage}:${r.algorithm}`));
    for (const want of ["allreduce:ring", "allreduce:tree", "allreduce:direct", "reduce_scatter:ring", "all_gather:ring", "broadcast:tree", "gather:tree", "scatter:tree", "reduce:direct", "all_to_all:direct"]) {
      assert.ok(ran.has(want), `${want} did not run (ran ${[...ran].join(" ")})`);
    }
  });
}

test("shm, W=2, 256Mi elements (1 GiB a rank): allreduce, all_to_all, 1-bit and int8", { timeout: 1_800_000 }, async () => {
  const rows = await runLarge(["allreduce", "all_to_all", "onebit", "int8_flat"], 2, 256 * Mi, { launch: ranks(), args: ["--backend", "shm"] });
  assert.equal(rows.length, 4);
});

// 2.25 GiB in one message (2^31 bytes and more): as int64 elements, so the check regenerates fewest values.
const OVER_2GIB = 288 * Mi;
for (const [backend, stage, algorithm] of [["shm", "broadcast", "auto"], ["shm", "send_recv", "auto"], ["tcp", "broadcast", "tree"], ["tcp", "send_recv", "auto"]]) {
  test(`${backend}: a ${stage} of ${(OVER_2GIB * 8) / 2 ** 30} GiB in one message (W=2, algorithm ${algorithm})`, { timeout: 1_800_000 }, async () => {
    await overTwoGiB(backend, stage, algorithm, ranks());
  });
}
mpiTest("mpi: a ring allreduce and the library's broadcast of 2.25 GiB (W=2)", async () => {
  await overTwoGiB("mpi", "allreduce", "ring", (W, args) => mpirun(W, args, { timeoutMs: 1_200_000 }));
  await overTwoGiB("mpi", "broadcast", "auto", (W, args) => mpirun(W, args, { timeoutMs: 1_200_000 }));
});

async function overTwoGiB(backend, stage, algorithm, launch) {
  const extra = { tensors: { big: { dtype: "int64", count: OVER_2GIB, fill: { kind: "integers", seed: 9, low: -1000, high: 1000 } } } };
  const op = { broadcast: { op: "broadcast", input: "big", root: 1 }, send_recv: { op: "send_recv", input: "big" }, allreduce: { op: "allreduce", input: "big" } }[stage];
  const stages = { [stage]: { stage: { ...op, ...(algorithm === "auto" ? {} : { algorithm }) }, out: 1 } };
  const rows = await runLarge([stage], 2, OVER_2GIB, { launch, args: ["--backend", backend], extra: { ...extra, stages } });
  assert.equal(rows[0].size, OVER_2GIB * 8);
}

if (mpiMissing && process.env.CI) test("CI runs the MPI cases", () => assert.fail(mpiMissing));
