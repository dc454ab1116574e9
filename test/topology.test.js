// The job's hosts as the ranks find them when they meet (comm/topology.ts): each rank's place among them,
// the launcher's variables checked against them, and the report's header line. The real launches across
// namespace hosts are in mpirun-hosts.test.js.
import assert from "node:assert/strict";
import { test } from "node:test";
import os from "node:os";
import { describeBinding, parseCpuList, sharesCores } from "../dist/comm/host.js";
import { contradictions, hostPlace, MPI_SHARED, topologyOf } from "../dist/comm/topology.js";
import { formatTable } from "../dist/report/table.js";

// mpirun --map-by node over two hosts: ranks dealt round-robin.
const roundRobin = topologyOf(["a", "b", "a", "b"].map((h) => ({ key: h, name: h })));

test("each rank's host, host index and local rank come from the hosts, whatever the numbering", () => {
  assert.deepEqual(roundRobin.hosts, [{ name: "a", ranks: [0, 2] }, { name: "b", ranks: [1, 3] }]);
  assert.deepEqual([0, 1, 2, 3].map((r) => hostPlace(roundRobin, r)), [
    { node: 0, localRank: 0, localSize: 2 }, { node: 1, localRank: 0, localSize: 2 },
    { node: 0, localRank: 1, localSize: 2 }, { node: 1, localRank: 1, localSize: 2 },
  ]);
  const unequal = topologyOf(["a", "a", "a", "b"].map((h) => ({ key: h, name: h })));
  assert.deepEqual(hostPlace(unequal, 3), { node: 1, localRank: 0, localSize: 1 });
});

test("the launcher's variables are a cross-check: agreement says nothing, a contradiction names the ranks", () => {
  // What Open MPI exports under --map-by node: local rank and size, no node index.
  const openMpi = [0, 0, 1, 1].map((localRank) => ({ localRank, localSize: 2 }));
  assert.equal(contradictions(roundRobin, openMpi), undefined);
  // SLURM's node index agrees when it groups the ranks as the hosts do, however it numbers the nodes.
  assert.equal(contradictions(roundRobin, openMpi.map((v, r) => ({ ...v, nodeRank: 1 - (r % 2) }))), undefined);
  // Variables that assume ranks numbered host by host: ranks 1 and 2 are placed wrongly, and node 1 spans
  // both hosts (rank 3).
  const hostMajor = [0, 1, 0, 1].map((localRank, r) => ({ localRank, localSize: 2, nodeRank: r >> 1 }));
  assert.equal(
    contradictions(roundRobin, hostMajor),
    "topology: the launcher's variables contradict the hosts the ranks met on, which are used: " +
      "rank 1 is local rank 0 of 2 on host b (node 1), the launcher says local rank 1 of 2 on node 0; " +
      "rank 2 is local rank 1 of 2 on host a (node 0), the launcher says local rank 0 of 2 on node 1; " +
      "rank 3 is local rank 1 of 2 on host b (node 1), the launcher says local rank 1 of 2 on node 1",
  );
  // Only the node index wrong: one node spanning both hosts.
  assert.match(contradictions(roundRobin, openMpi.map((v) => ({ ...v, nodeRank: 0 }))), /: rank 1 is local rank 0 of 2 on host b \(node 1\), the launcher says local rank 0 of 2 on node 0; rank 3 /);
  // Four ranks named at most.
  const many = topologyOf(Array.from({ length: 8 }, (_, r) => ({ key: String(r % 2), name: `h${r % 2}` })));
  const wrong = contradictions(many, Array.from({ length: 8 }, (_, r) => ({ localRank: r % 4, localSize: 4 })));
  assert.match(wrong, /: rank 1 .*; rank 4 is local rank 2 of 4 on host h0 \(node 0\), the launcher says local rank 0 of 4; and 2 more$/);
  assert.equal(wrong.split("; ").length, 5);
  // MPI's shared-memory split is checked alike where the ranks met over MPI.
  assert.equal(contradictions(roundRobin, [0, 1, 2, 3].map((r) => ({ localRank: r, localSize: 4 })), MPI_SHARED),
    "topology: MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) contradicts the hosts the ranks met on, which are used: " +
    "rank 0 is local rank 0 of 2 on host a (node 0), MPI says local rank 0 of 4; rank 1 is local rank 0 of 2 on host b (node 1), MPI says local rank 1 of 4; " +
    "rank 2 is local rank 1 of 2 on host a (node 0), MPI says local rank 2 of 4; rank 3 is local rank 1 of 2 on host b (node 1), MPI says local rank 3 of 4");
});

test("the table's header lists the hosts and their ranks, with links where the runner made them", () => {
  const doc = (topology) => ({ version: "0", job: "j", world_size: 4, backend: "mpi", topology, results: [], average_bus_bandwidth: 0 });
  const lines = (t) => formatTable(doc(t)).split("\n").slice(0, 2);
  assert.deepEqual(lines({ hosts: roundRobin.hosts }), ["# spmd-runner 0: job j, 4 ranks, backend mpi", "# 2 hosts: a (ranks 0,2), b (ranks 1,3)"]);
  assert.equal(lines({ hosts: [{ name: "vm", ranks: [0, 1, 2, 3] }], links: { shm: 6, tcp: 0 } })[1], "# 1 host: vm (ranks 0-3); links: 6 shm");
});

test("a rank shares its cores when the host's ranks whose CPU sets overlap its own outnumber its CPUs", () => {
  assert.deepEqual(parseCpuList("0-2,5,7-8"), [0, 1, 2, 5, 7, 8]);
  assert.deepEqual(parseCpuList("3"), [3]);
  // mpirun's default binding: a core per rank, each sees one CPU, none shares.
  assert.equal(sharesCores([0], [[0], [1]]), false);
  // unbound, as many ranks as CPUs: each may have one (the spin rule of runner launch before bindings).
  assert.equal(sharesCores([0, 1], [[0, 1], [0, 1]]), false);
  // 8 unbound ranks on 2 CPUs; 4 ranks under `taskset -c 0`; two ranks bound to the same core.
  assert.equal(sharesCores([0, 1], Array(8).fill([0, 1])), true);
  assert.equal(sharesCores([0], Array(4).fill([0])), true);
  assert.equal(sharesCores([1], [[0], [1], [1]]), true);
  // A rank that cannot say counts as bound to every CPU of the machine.
  const all = os.cpus().length;
  assert.equal(sharesCores(null, Array(all + 1).fill(null)), true);
  assert.equal(sharesCores(null, [null]), false);
  assert.match(describeBinding([0]), all > 1 ? /^CPUs 0 \(bound; \d+ online\)$/ : /^CPUs 0 \(not bound\)$/);
  assert.equal(describeBinding(null), "unknown (no /proc)");
});

// Issue 63 item 5: each rank meets the others' identities at start-up, so what it does with them is linear in
// W. Before: a new host searched every host met so far for its name, and the launcher's cross-check searched
// each rank's host for it (W² on one host): seconds to minutes at the cap.
test("the hosts of 65536 ranks, one per host and all on one, and the cross-check of each, in well under a second", () => {
  const W = 65536;
  const apartIds = Array.from({ length: W }, (_, r) => ({ key: `k${r}`, name: r % 2 ? "same" : `n${r}` }));
  const togetherIds = Array.from({ length: W }, () => ({ key: "k", name: "vm" }));
  const said = Array.from({ length: W }, (_, r) => ({ localRank: r, localSize: W }));
  // The best of three, for a loaded machine: linear takes tens of ms here, W² some seconds.
  let best = Infinity, apart, together;
  for (let i = 0; i < 3; i++) {
    const t0 = performance.now();
    apart = topologyOf(apartIds);
    together = topologyOf(togetherIds);
    assert.equal(contradictions(together, said), undefined);
    best = Math.min(best, performance.now() - t0);
  }
  assert.equal(apart.hosts.length, W);
  assert.deepEqual(apart.hosts.slice(0, 4).map((h) => h.name), ["n0", "same", "n2", "same#2"]);
  assert.equal(apart.hosts[W - 1].name, `same#${W / 2}`);
  assert.match(contradictions(together, said.map((v) => ({ ...v, localRank: W - 1 - v.localRank }))) ?? "", /and 65532 more$/);
  assert.ok(best < 1_000, `${best.toFixed(0)} ms`);
});
