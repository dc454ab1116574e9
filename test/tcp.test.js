// The tcp backend on this one host (loopback; no root needed): every stage at 2 and 8 ranks (8 on 2
// cores) checked element by element against helpers/matrix.js, over IPv4 and IPv6, with --iface naming
// an interface or an address; and what the ranks agree on when they meet. Across hosts: netns.test.js.
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import { test } from "node:test";
import { bindAddress, listenPlan, peerAddress } from "../dist/comm/tcp-address.js";
import { linkCounts, topologyOf } from "../dist/comm/topology.js";
import { bigJob, prepareJob, slicedRingJob, smallJob, verifyDumps } from "./helpers/matrix.js";
import { runRanks } from "./helpers/ranks.js";

async function exact(W, job, { dump, args, env = {} }) {
  const { dir, json, dumpDir, run } = prepareJob(W, job, { dump, extraArgs: args, launch: (n, a) => runRanks(n, a, { env }) });
  try {
    const ranks = await run();
    ranks.forEach((p, r) => assert.equal(p.code, 0, `rank ${r} exited ${p.code}: ${p.stderr}`));
    const doc = JSON.parse(readFileSync(json, "utf8"));
    assert.equal(doc.backend, "tcp");
    assert.deepEqual(doc.topology.links, { shm: 0, tcp: (W * (W - 1)) / 2 });
    assert.equal(doc.results.length, job.stages.length);
    for (const row of doc.results) if (row.type) assert.equal(row.wrong, 0, `${row.stage}: runner's check found ${row.wrong} wrong`);
    if (dump) assert.ok(verifyDumps(job, W, dumpDir) > 1000 * W, "too few elements compared");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

for (const [W, iface] of [[2, "lo"], [8, undefined]]) {
  const args = ["--backend", "tcp", ...(iface ? ["--iface", iface] : [])];
  test(`tcp backend, W=${W}${iface ? ` --iface ${iface}` : ""}: every stage, every dtype, exact element by element; 1000003 elements checked`, async () => {
    await exact(W, smallJob(W), { dump: true, args });
    await exact(W, bigJob(W), { dump: false, args });
  });
}

test("tcp backend, W=3: the ring allreduce with blocks of several slices (last ones short), in place too, every element checked", async () => {
  await exact(3, slicedRingJob(), { args: ["--backend", "tcp"] });
});

test("tcp backend over IPv6: rendezvous at [::1], --iface ::1, W=3, every stage exact", async () => {
  await exact(3, smallJob(3), { dump: true, args: ["--backend", "tcp", "--iface", "::1"], env: { MASTER_ADDR: "::1" } });
});

test("tcp addresses: --iface by prefix, =exact, ^excluded or address; dialled in a shared subnet, loopback on the same host", () => {
  const info = (address, cidr, extra = {}) => ({ address, cidr, family: address.includes(":") ? "IPv6" : "IPv4", internal: false, netmask: "", mac: "", ...extra });
  const interfaces = {
    lo: [info("127.0.0.1", "127.0.0.1/8", { internal: true }), info("::1", "::1/128", { internal: true })],
    eth0: [info("192.0.2.2", "192.0.2.2/24"), info("fd00::2", "fd00::2/64"), info("fe80::1", "fe80::1/64", { scopeid: 2 })],
    ib0: [info("10.1.0.5", "10.1.0.5/16")],
    docker0: [info("172.17.0.1", "172.17.0.1/16")],
  };
  assert.deepEqual(listenPlan(undefined, interfaces), {
    bind: "::",
    addresses: [
      { address: "192.0.2.2", prefix: 24 }, { address: "10.1.0.5", prefix: 16 }, { address: "172.17.0.1", prefix: 16 }, { address: "fd00::2", prefix: 64 },
    ],
  });
  assert.deepEqual(listenPlan("ib", interfaces), { bind: "10.1.0.5", addresses: [{ address: "10.1.0.5", prefix: 16 }] });
  assert.equal(listenPlan("=eth0", interfaces).bind, "192.0.2.2");
  assert.equal(listenPlan("^docker,^lo,^eth", interfaces).bind, "10.1.0.5");
  assert.equal(listenPlan("fd00::2", interfaces).bind, "fd00::2");
  assert.throws(() => listenPlan("wlan", interfaces), { message: /tcp.iface "wlan": no interface matches it with a usable address \(here: lo 127.0.0.1 ::1, eth0 /, exitCode: 2 });

  const mine = listenPlan(undefined, interfaces).addresses;
  const peer = (addresses, bound = "::") => ({ port: 1, bound, addresses: addresses.map((a) => ({ address: a.split("/")[0], prefix: Number(a.split("/")[1]) })) });
  assert.equal(peerAddress(peer(["198.51.100.7/24", "10.1.3.9/16"]), 1, false, mine), "10.1.3.9", "the address in a subnet of ours");
  assert.equal(peerAddress(peer(["198.51.100.7/24", "fd00::9/64"]), 1, false, mine), "fd00::9");
  assert.equal(peerAddress(peer(["198.51.100.7/24"]), 1, false, mine), "198.51.100.7", "else its first");
  assert.equal(peerAddress(peer(["192.0.2.9/24"]), 1, true, mine), "127.0.0.1", "the same host: loopback");
  assert.equal(peerAddress(peer([], "10.1.0.7"), 1, false, mine), "10.1.0.7", "bound to one address: that one");
  assert.throws(() => peerAddress(peer([]), 3, false, mine), { message: /rank 3 runs on another host that has no address but loopback/ });
});

test("tcp listeners bind where the job's ranks dial them: loopback on one host, the address the other hosts share a subnet with, --iface's", () => {
  const plan = { bind: "::", addresses: [{ address: "192.0.2.2", prefix: 24 }, { address: "10.1.0.5", prefix: 16 }, { address: "fd00::2", prefix: 64 }] };
  const host = (...addresses) => addresses.map((a) => ({ address: a.split("/")[0], prefix: Number(a.split("/")[1]) }));
  assert.equal(bindAddress(plan, []), "127.0.0.1", "every rank on this host");
  assert.equal(bindAddress(plan, [host("10.1.7.7/16"), host("10.1.8.8/16", "203.0.113.1/24")]), "10.1.0.5", "every other host dials it in 10.1/16");
  assert.equal(bindAddress(plan, [host("198.51.100.7/24")]), "192.0.2.2", "no shared subnet: the first, as peerAddress dials");
  assert.equal(bindAddress(plan, [host("10.1.7.7/16"), host("fd00::9/64")]), "::", "hosts that dial different addresses: every interface");
  assert.equal(bindAddress({ ...plan, bind: "10.1.0.5" }, [host("fd00::9/64")]), "10.1.0.5", "--iface wins");
});

test("tcp addresses: an IPv4-mapped IPv6 address (::ffff:a.b.c.d) is its IPv4 address", () => {
  const mine = [{ address: "10.1.0.5", prefix: 16 }, { address: "fd00::2", prefix: 64 }];
  const peer = (addresses) => ({ port: 1, bound: "::", addresses: addresses.map((a) => ({ address: a.split("/")[0], prefix: Number(a.split("/")[1]) })) });
  assert.equal(peerAddress(peer(["198.51.100.7/24", "::ffff:10.1.3.9/112"]), 1, false, mine), "::ffff:10.1.3.9", "in our 10.1/16");
  assert.equal(peerAddress(peer(["198.51.100.7/24", "::FFFF:10.2.3.9/112"]), 1, false, mine), "198.51.100.7", "outside it");
  assert.equal(peerAddress(peer(["198.51.100.7/24", "::ffff:0a01:0309/112"]), 1, false, mine), "::ffff:0a01:0309", "in hex words");
  // A mapped address of ours, its prefix over all 128 bits: 96 + 16.
  const mapped = [{ address: "::ffff:10.1.0.5", prefix: 112 }];
  assert.equal(peerAddress(peer(["198.51.100.7/24", "10.1.200.1/16"]), 1, false, mapped), "10.1.200.1");
  assert.equal(peerAddress(peer(["198.51.100.7/24", "fd00::ffff:a01:1/64"]), 1, false, mine), "fd00::ffff:a01:1", "not mapped: plain IPv6");
});

test("topology: ranks grouped by host identity, names made unique, links counted", () => {
  const t = topologyOf([{ key: "a", name: "n" }, { key: "b", name: "n" }, { key: "a", name: "n" }, { key: "c", name: "m" }]);
  assert.deepEqual(t.hosts, [{ name: "n", ranks: [0, 2] }, { name: "n#2", ranks: [1] }, { name: "m", ranks: [3] }]);
  assert.deepEqual(t.hostOf, [0, 1, 0, 2]);
  assert.deepEqual(linkCounts(t, true), { shm: 1, tcp: 5 });
  assert.deepEqual(linkCounts(t, false), { shm: 0, tcp: 6 });
});

test('tcp backend refuses algorithm "shared" (the shm backend\'s own): a one-line error naming the stage, every rank exits 2', async () => {
  const job = {
    name: "shared-on-tcp", iterations: 1, warmup: 0, check: true,
    tensors: { t: { dtype: "float32", count: 64 } },
    stages: [{ id: "ar", op: "allreduce", input: "t", algorithm: "shared" }],
  };
  const { dir, run } = prepareJob(2, job, { extraArgs: ["--backend", "tcp"] });
  try {
    const ranks = await run();
    ranks.forEach((p, r) => {
      assert.equal(p.code, 2, `rank ${r} exited ${p.code}: ${p.stderr}`);
      assert.match(p.stderr, /^runner \(rank \d\): \S+\.json: stages\[0\]\.algorithm: "shared" needs the shm backend \(every rank on one host\), not tcp\n$/, `rank ${r}: ${p.stderr}`);
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
