// A network that loses packets and one that splits: hosts are network namespaces (test/helpers/netns.js)
// whose eth0 drops 5% of incoming packets at random (iptables' statistic match; this kernel has no
// sch_netem, so no netem loss), and a host whose link is taken down mid-run. TCP recovers from the losses,
// and the job's result is right element for element; the partition ends every rank at the deadline, each
// naming the ranks it cannot reach. Needs root; skipped with the reason otherwise, except in CI.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { netnsUnavailable, placeRanks, runInHost, runSpread, withHosts } from "./helpers/netns.js";
import { requiredTest } from "./helpers/required.js";
import { withTempDir } from "./helpers/tmp.js";

const iptablesMissing = () => (spawnSync("iptables", ["-V"]).error ? "iptables not found" : undefined);
const netTest = requiredTest("lossy-network.test.js", netnsUnavailable() ?? iptablesMissing());
const T = { timeout: 120_000 };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function inHost(host, ...args) {
  const p = spawnSync("ip", ["netns", "exec", host.ns, ...args], { encoding: "utf8" });
  assert.equal(p.status, 0, `${args.join(" ")}: ${p.stderr}`);
}

const withDir = (body) => withTempDir("spmd-lossy-", body);

function writeJob(dir, job) {
  const file = path.join(dir, `${job.name}.json`);
  writeFileSync(file, JSON.stringify(job));
  return file;
}

netTest("5% of packets dropped at random: the job finishes with every element right (tcp, 3 hosts)", T, () =>
  withDir((dir) =>
    withHosts(3, async (hosts) => {
      for (const h of hosts) inHost(h, "iptables", "-A", "INPUT", "-m", "statistic", "--mode", "random", "--probability", "0.05", "-j", "DROP");
      const job = writeJob(dir, {
        name: "lossy", iterations: 3, warmup: 1, check: true, timeoutSec: 60,
        tensors: { t: { dtype: "float32", count: 100_003, fill: { kind: "integers", seed: 3, low: -8, high: 8 } } },
        stages: [
          { id: "ar", op: "allreduce", input: "t", algorithm: "ring" },
          { id: "bc", op: "broadcast", input: "t", root: 2, algorithm: "tree" },
          { id: "ga", op: "gather", input: "t", root: 1, algorithm: "tree" },
          { id: "ag", op: "all_gather", input: "t" },
        ],
      });
      const json = path.join(dir, "r.json");
      const ranks = await runSpread(hosts, [0, 1, 2], [job, "--backend", "tcp", "--out", dir, "--json", json]);
      ranks.forEach((p, r) => assert.equal(p.code, 0, `rank ${r}: ${p.stderr}`));
      const doc = JSON.parse(readFileSync(json, "utf8"));
      assert.deepEqual(doc.results.map((row) => [row.stage, row.wrong]), [["ar", 0], ["bc", 0], ["ga", 0], ["ag", 0]]);
    }, { ipv6: false })));

netTest("a link taken down mid-run: every rank ends at the deadline naming the ranks it cannot reach", T, () =>
  withDir((dir) =>
    withHosts(3, async (hosts) => {
      const timeoutSec = 3;
      const job = writeJob(dir, {
        name: "split", iterations: 1_000_000, warmup: 0, timeoutSec, check: true,
        tensors: { t: { dtype: "float32", count: "16Ki" } },
        stages: [{ id: "ar", op: "allreduce", input: "t" }],
      });
      const envs = placeRanks(hosts, [0, 1, 2]);
      const ranks = envs.map((env, r) =>
        runInHost(hosts[r], [job, "--backend", "tcp", "--out", dir, "--log-level", "debug", "--log-all-ranks"], env, 60_000));
      while (!ranks.every((r) => /running 1 stage/.test(r.output()))) await sleep(200);
      await sleep(300);
      const downAt = Date.now();
      inHost(hosts[2], "ip", "link", "set", "eth0", "down");
      const ended = await Promise.all(ranks.map((r) => r.done));
      const took = Date.now() - downAt;
      // The deadline, the roll call (1 s) and a loaded machine.
      assert.ok(took < timeoutSec * 1000 + 12_000, `the ranks took ${took} ms to end:\n${ended.map((p) => p.stderr.slice(-600)).join("\n")}`);
      for (const [r, p] of ended.entries()) assert.equal(p.code, 1, `rank ${r}: ${p.stderr}`);
      // Ranks 0 and 1 lost rank 2, and rank 2 lost everyone: each names whom its roll call could not reach.
      for (const r of [0, 1]) assert.match(ended[r].stderr, /holding up op #\d+[^:]*: rank 2 is unreachable \(/, `rank ${r}: ${ended[r].stderr}`);
      assert.match(ended[2].stderr, /holding up op #\d+[^:]*: rank 0 is unreachable \([^)]*\); rank 1 is unreachable \(/, ended[2].stderr);
      for (const p of ended) assert.doesNotMatch(p.stdout, /# Out of bounds values/, "no result is reported");
    }, { ipv6: false })));
