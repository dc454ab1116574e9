// `runner doctor`: the round schedule (every pair once, in rounds of disjoint pairs; bisection above 16
// hosts), and real ranks on 4 namespace hosts whose egress is shaped by tc tbf: with one host at a tenth of
// the others' rate doctor names that host and its three links and exits 1; with all equal it names nothing.
// The namespace tests need root; skipped with the reason otherwise, except in CI (CI set), where that fails.
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { findOutliers, roundRobin, survey } from "../dist/doctor/schedule.js";
import { mpirun, mpiTest } from "./helpers/mpi.js";
import { netnsUnavailable, runSpread, withHosts } from "./helpers/netns.js";
import { RUNNER, runNode } from "./helpers/ranks.js";
import { requiredTest } from "./helpers/required.js";

const netnsTest = requiredTest("doctor.test.js", netnsUnavailable());

test("roundRobin: every pair of n hosts exactly once, in n-1 (even n) or n (odd n) rounds of disjoint pairs", () => {
  for (let n = 2; n <= 17; n++) {
    const hosts = Array.from({ length: n }, (_, i) => i);
    const rounds = roundRobin(hosts);
    assert.equal(rounds.length, n % 2 ? n : n - 1, `n=${n}`);
    const seen = new Set();
    for (const round of rounds) {
      const busy = round.flat();
      assert.equal(new Set(busy).size, busy.length, `n=${n}: a host twice in one round`);
      for (const [a, b] of round) {
        assert.ok(a < b, `n=${n}: pair ${a}-${b}`);
        assert.ok(!seen.has(`${a}-${b}`), `n=${n}: pair ${a}-${b} twice`);
        seen.add(`${a}-${b}`);
      }
    }
    assert.equal(seen.size, (n * (n - 1)) / 2, `n=${n}`);
  }
});

/** A fake network: every link 10 GB/s but those of `slow` hosts, 1 GB/s; counts rounds. */
function fakeNetwork(slow) {
  const net = { rounds: 0, pairs: 0 };
  net.measure = async (pairs) => {
    net.rounds++;
    net.pairs += pairs.length;
    const used = pairs.flatMap(([a, b]) => (a === b ? [a] : [a, b]));
    assert.equal(new Set(used).size, used.length, "a host in two pairs of one round");
    return pairs.map(([a, b]) => ({ gbps: slow.includes(a) || slow.includes(b) ? 1 : 10, us: 5 }));
  };
  return net;
}

test("survey: 12 hosts get every pair (11 rounds); 40 hosts bisect to the slow host in 14 rounds and under a fifth of the 780 pairs", async () => {
  const names = (n) => Array.from({ length: n }, (_, i) => `h${i}`);
  const small = fakeNetwork([7]);
  const measured12 = await survey(12, [], small.measure, 0.5);
  assert.equal(small.rounds, 11);
  assert.equal(measured12.size, 66);
  const found12 = findOutliers(names(12), measured12, 0.5);
  assert.deepEqual(found12.filter((o) => o.kind === "host").map((o) => o.host), ["h7"]);
  assert.equal(found12.filter((o) => o.kind === "link").length, 11);
  assert.ok(found12.filter((o) => o.kind === "link").every((o) => o.hosts.includes("h7")));

  const big = fakeNetwork([33]);
  const measured40 = await survey(40, [0, 1], big.measure, 0.5);
  const found40 = findOutliers(names(40), measured40, 0.5);
  assert.deepEqual(found40.filter((o) => o.kind === "host").map((o) => o.host), ["h33"]);
  // One intra-host round, 2 cross rounds at 40, 20 hosts, then 9 round-robin rounds among the 10.
  assert.ok(big.rounds <= 1 + 2 + 2 + 9, `${big.rounds} rounds`);
  assert.ok(big.pairs < 780 / 5, `${big.pairs} pairs measured`);

  const even = fakeNetwork([]);
  const measuredEven = await survey(40, [], even.measure, 0.5);
  assert.deepEqual(findOutliers(names(40), measuredEven, 0.5), []);
  assert.equal(even.rounds, 2, "all links equal: the cross rounds are enough");
});

/** Runs `start(json, out)`, which starts doctor's ranks; returns its answer and results.json. */
async function doctorRun(start) {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-doctor-"));
  try {
    const json = path.join(dir, "doctor.json");
    const p = await start(["--size", "1Mi", "--iterations", "3", "--out", path.join(dir, "runs"), "--json", json]);
    return { p, doc: p.code === 0 ? JSON.parse(readFileSync(json, "utf8")) : undefined };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** One host: nothing between hosts, the diagonal measured, no outliers. */
function assertOneHost({ p, doc }, backend) {
  assert.equal(p.code, 0, p.stderr);
  assert.equal(doc.backend, backend);
  assert.equal(doc.doctor.hosts.length, 1);
  assert.ok(doc.doctor.bandwidth_gbps[0][0] > 0 && doc.doctor.latency_us[0][0] > 0, JSON.stringify(doc.doctor));
  assert.deepEqual(doc.doctor.outliers, []);
  assert.match(p.stdout, /Bandwidth \(GB\/s.*\n.*\n.*\s\d+\.\d{3}\n/);
}

test("runner launch -n 3 doctor: 3 local ranks over shm; bad doctor options are one line and exit 2", async () => {
  assertOneHost(await doctorRun((args) => runNode([RUNNER, "launch", "-n", "3", "doctor", ...args])), "shm");
  const bad = [
    [["doctor", "--threshold", "2"], /--threshold: expected a fraction between 0 and 1, got 2/],
    [["doctor", "--size", "6"], /--size: expected a multiple of 4 bytes, got 6/],
    [["launch", "-n", "2", "jobs/quickstart.json", "--threshold", "0.3"], /--threshold is an option of doctor only/],
  ];
  for (const [args, message] of bad) {
    const p = await runNode([RUNNER, ...args]);
    assert.equal(p.code, 2, `${args.join(" ")}: ${p.stderr}`);
    assert.match(p.stderr, message);
    assert.equal(p.stderr.trim().split("\n").length, 1, p.stderr);
  }
});

mpiTest("mpirun -np 3 node runner doctor: the mpi backend's send_recv pairs", async () => {
  assertOneHost(await doctorRun((args) => mpirun(3, ["doctor", ...args])), "mpi");
});

/**
 * doctor's 5 ranks on 4 hosts (2 on host 0, so it also measures shm within a host), each host's egress
 * shaped as `rates` says; returns every rank's exit and output and rank 0's results.json.
 */
async function doctorOn(rates) {
  const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-doctor-"));
  try {
    return await withHosts(4, async (hosts) => {
      const json = path.join(dir, "doctor.json");
      const ranks = await runSpread(hosts, [0, 0, 1, 2, 3], ["doctor", "--size", "2Mi", "--iterations", "3", "--out", path.join(dir, "runs"), "--json", json], { timeoutMs: 60_000 });
      const [runDir] = readdirSync(path.join(dir, "runs"));
      const html = readFileSync(path.join(dir, "runs", runDir, "report.html"), "utf8");
      return { ranks, doc: JSON.parse(readFileSync(json, "utf8")), html, shaping: hosts.shaping };
    }, { shape: rates.map((rate) => ({ rate })) });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

netnsTest("doctor on 4 hosts, host 3 shaped to a tenth (100 vs 1000 Mbit/s): names host 3 and its 3 links, exits 1", async () => {
  const { ranks, doc, html, shaping } = await doctorOn(["1gbit", "1gbit", "1gbit", "100mbit"]);
  console.log(`# shaping: ${shaping.join(", ")}`);
  for (const line of ranks[0].stdout.split("\n")) console.log(`# ${line}`);
  ranks.forEach((p, r) => assert.equal(p.code, 1, `rank ${r} exited ${p.code}: ${p.stderr}`));
  const d = doc.doctor;
  assert.equal(d.hosts.length, 4);
  assert.equal(doc.backend, "shm+tcp");
  const slow = d.hosts[3];
  const links = d.outliers.filter((o) => o.kind === "link");
  assert.deepEqual(d.outliers.filter((o) => o.kind === "host").map((o) => o.host), [slow]);
  assert.equal(links.length, 3, JSON.stringify(d.outliers));
  assert.ok(links.every((o) => o.hosts.includes(slow)));
  // A 100 Mbit/s link carries at most 0.0125 GB/s; the others' 1 Gbit/s, 0.125.
  for (let a = 0; a < 4; a++) {
    for (let b = a + 1; b < 4; b++) {
      const g = d.bandwidth_gbps[a][b];
      assert.equal(g, d.bandwidth_gbps[b][a]);
      if (b === 3) assert.ok(g < 0.0135, `${d.hosts[a]}-${d.hosts[b]} ${g} GB/s`);
      else assert.ok(g > 0.03 && g < 0.2, `${d.hosts[a]}-${d.hosts[b]} ${g} GB/s`);
      assert.ok(d.latency_us[a][b] > 0);
    }
  }
  assert.ok(d.bandwidth_gbps[0][0] > 0, "shm within host 0 measured");
  assert.equal(d.bandwidth_gbps[1][1], null, "host 1 holds one rank");
  assert.match(ranks[0].stdout, new RegExp(`outlier: host ${slow.replace(/[#]/g, "\\$&")}`));
  assert.match(html, /Bandwidth between hosts/);
  assert.match(html, /<svg/);
});

netnsTest("doctor on 4 hosts, all at 1 Gbit/s: no outliers, exits 0", async () => {
  const { ranks, doc } = await doctorOn(["1gbit", "1gbit", "1gbit", "1gbit"]);
  ranks.forEach((p, r) => assert.equal(p.code, 0, `rank ${r} exited ${p.code}: ${p.stderr}`));
  assert.deepEqual(doc.doctor.outliers, []);
  assert.match(ranks[0].stdout, /no outliers/);
});
